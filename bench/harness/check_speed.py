"""Verdict speed: how long a check takes, against its floor and a baseline tree.

``python3 bench/harness/check_speed.py [--device cpu|cuda] [--baseline TREE] [--only PARTS]`` runs,
in one process and interleaved round by round (so a busy machine slows every subject alike):

``oneshot``   ``python -c "import torch, triton"`` (the floor), ``ctxkernel check`` (as
              ``python -m harness check``, which a bare GPU machine can run) of the
              vector add example in-process (``--no-server``: warm worker template, the
              default before the check server), the same with ``--cold`` (every worker a
              fresh interpreter), through the check server (``harness/server/client.py``):
              ``server_first`` the first call (the servers stopped before it: it starts
              one) and ``server`` the second call (served warm), and the baseline tree's
              ``ctxkernel check`` (``--baseline``: an export of another commit, e.g. main at
              8021ae1, or the revision itself, read out by ``bench/baseline.py``; run with
              the same interpreter, as it runs by default). Per check:
              wall, compile (import + first call, from the verdict), overhead = wall -
              compile - run, how the workers started; the server rows' CPU time includes
              the server's and its templates' (read from ``/proc``).
``--problem P --candidate C`` checks those files (e.g. an upstream problem and solution,
unchanged) instead of the example, with every tree.

``longlived`` a parent that stays up: one untimed check (the template starts), then
              ``--repeat`` timed checks through ``harness.check`` in the same process; on a
              GPU also ``--blocks`` blocks of ``--bench-repeat`` timed ``--bench`` checks,
              ours and the baseline's alternating (each block its own parent).
``bench``     (cuda) the same one-shot check with ``--bench``, ours and the baseline's;
              ``--server-repeat`` warm calls through the server per round.
``pool``      (cuda) ``bench/harness/pool_throughput.py`` of each tree on one GPU (distinct
              honest vector-add candidates, warm pool): candidates per minute.
``timing``    (cuda) the Triton, CuTeDSL and CUDA C++ vector adds at n = 2^28: two timing
              runs each (``--bench``, two identical BENCH shapes) and ncu's
              ``gpu__time_duration.sum`` (``--profile``); harness / ncu and the two-run
              difference, ours and the baseline's; the witness (kernel records) where ours
              has it.

Prints one JSON document (``--out FILE`` writes it too) and, with ``--results``, appends a
dated table to ``bench/RESULTS.md``. Needs nothing installed beyond the venv: each tree
is put first on ``PYTHONPATH``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.append(str(Path(__file__).resolve().parents[2]))  # bench.baseline
from bench import baseline

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = "examples/vector_add"
CANDIDATE = "examples/vector_add/solution_triton.py"
SUBJECT = [EXAMPLE, CANDIDATE]  # what the check rows check (``--problem``/``--candidate``)
BENCH_SHAPES: list[dict[str, Any]] = []  # ``--bench-shape``: the long-lived rows time these
BIG = 1 << 28
SOLUTIONS = {
    "triton": "solution_triton.py",
    "cutedsl": "solution_cutedsl.py",
    "cuda": "solution_cuda.py",
}

LONG_LIVED = r"""
import json, os, resource, sys, time
from pathlib import Path
from harness.process import templates
from harness.runner import LocalRunner, RunOptions, check

def cpu():
    # this process, its reaped children, and what each template's reaped forks used
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime
    for template in list(templates._templates.values()):
        try:
            fields = open(f"/proc/{template.proc.pid}/stat").read().rsplit(")", 1)[1].split()
            total += (int(fields[13]) + int(fields[14])) / os.sysconf("SC_CLK_TCK")
        except (OSError, IndexError, ValueError):
            pass
    return total
tree, device, repeat, bench = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1"
shapes = json.loads(sys.argv[7]) if len(sys.argv) > 7 else None  # None: the problem's
options = RunOptions(device=device, record=False, bench=bench, bench_shapes=shapes)
problem, cand = (tree / p for p in sys.argv[5:7])  # relative: the tree's; absolute: as given
rows = []
for i in range(repeat + 1):
    c0, t0 = cpu(), time.perf_counter()
    verdict = check(problem, cand, options, runner=LocalRunner())
    wall = time.perf_counter() - t0
    time.sleep(1.2)  # the template reaps its forks once a second: their CPU time is counted
    rows.append({"wall_s": wall, "cpu_s": cpu() - c0, "ok": verdict.ok, "verdict": verdict.to_json()})
print(json.dumps(rows))
"""

TIMING = r"""
import json, sys
from pathlib import Path
from harness.runner import LocalRunner, RunOptions, check
tree, solution, n = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
options = RunOptions(device="cuda", record=False, bench=True, profile=True,
                     bench_shapes=[{"n": n}, {"n": n}])
verdict = check(tree / "examples/vector_add", tree / "examples/vector_add" / solution, options,
                runner=LocalRunner())
print(json.dumps(verdict.to_json()))
"""


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    return env


CPU: list[float] = [0.0]  # CPU seconds of the last _run (it and every process it reaped)
LAST_ERR: list[str] = [""]  # the last _run's stderr


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _run(args: list[str], tree: Path, timeout: float = 600.0) -> tuple[float, str, int]:
    """``python ARGS`` of ``tree``, in it: (wall s, stdout, exit status)."""
    c0, t0 = _children_cpu(), time.perf_counter()
    proc = baseline.run(tree, args, env=_env(), check=False, timeout=timeout)
    wall = time.perf_counter() - t0
    CPU[0] = _children_cpu() - c0
    LAST_ERR[0] = proc.stderr
    if proc.returncode not in (0, 1):
        sys.stderr.write(f"check_speed: {' '.join(args[:3])}... exited {proc.returncode}\n")
        sys.stderr.write(proc.stderr[-1500:] + "\n")
    return wall, proc.stdout, proc.returncode


def _rungs(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {str(r.get("name")): r for r in doc.get("rungs") or []}


def _phases(doc: dict[str, Any], wall: float) -> dict[str, Any]:
    """Wall, compile (the candidate's import + first call) and overhead of one verdict."""
    rungs = _rungs(doc)
    compile_m = (rungs.get("compile") or {}).get("metrics") or {}
    run_m = (rungs.get("run") or {}).get("metrics") or {}
    compile_s = float(compile_m.get("import_s") or 0) + float(compile_m.get("first_call_s") or 0)
    run_s = float(run_m.get("elapsed_s") or 0)
    bench = rungs.get("benchmark") or {}
    details = bench.get("details") or {}
    shapes = details.get("shapes") or [{}]
    first = ((shapes[0].get("rounds") or [{}])[0].get("candidate")) or {}
    inside = {k: first.get(k) for k in ("warmup_s", "setup_s", "witness_s", "timed_s")}
    correctness = ((rungs.get("correctness") or {}).get("details") or {}).get("phase_s")
    return {
        "wall_s": round(wall, 3),
        "compile_s": round(compile_s, 3),
        "run_s": round(run_s, 4),
        "overhead_s": round(wall - compile_s - run_s, 3),
        "ok": doc.get("ok"),
        "workers": (doc.get("environment") or {}).get("workers"),
        "bench_status": bench.get("status"),
        "rung_s": (doc.get("environment") or {}).get("rung_s"),
        "correctness_s": correctness,  # its workers' requests, their settle waits, the parent
        # where the benchmark rung's seconds went: its workers, each step, inside the worker
        "bench_s": {**(details.get("phase_s") or {}), **(shapes[0].get("phase_s") or {}), **inside}
        if bench
        else None,
    }


def _verdict_json(stdout: str) -> dict[str, Any]:
    for line in stdout.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                doc = json.loads(line)
            except ValueError:
                continue
            if isinstance(doc, dict) and (doc.get("type") == "verdict" or "rungs" in doc):
                return doc
    return {}


def _check_cmd(device: str, extra: list[str]) -> list[str]:
    """``ctxkernel check`` as it runs on a bare GPU machine (``python -m harness check``:
    the same command, without the retrieval stack)."""
    cmd = ["-m", "harness", "check", *SUBJECT, "--json", "--no-record"]
    return [*cmd, "--device", device, *extra]


def _servers(tree: Path, op: str = "status") -> list[dict[str, Any]]:
    """This tree's check servers (``check-server status --json``), or stop them."""
    args = ["-m", "harness", "check-server", op, "--json"]
    proc = baseline.run(tree, args, env=_env(), check=False)
    docs = []
    for line in proc.stdout.splitlines():
        with contextlib.suppress(ValueError):
            docs.append(json.loads(line))
    return [d for d in docs if d.get("type") == "check_server" and d.get("alive")]


def _proc_cpu(pid: int) -> float:
    """CPU seconds of a process and its reaped children (``/proc/PID/stat``)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def _server_cpu(tree: Path) -> float:
    """CPU seconds so far of the check servers and their worker templates (whose forked
    workers they reap once a second)."""
    total = 0.0
    for doc in _servers(tree):
        total += _proc_cpu(int(doc["pid"]))
        total += sum(_proc_cpu(int(t["pid"])) for t in doc.get("templates") or [])
    return total


def oneshot(
    device: str,
    rounds: int,
    baseline: Path | None,
    extra: list[str],
    cold: bool = True,
    served: int = 1,
) -> dict[str, Any]:
    """``served``: warm calls through the check server per round (after ``server_first``)."""
    subjects: dict[str, list[dict[str, Any]]] = {"import": [], "check": []}
    if cold:
        subjects["check_cold"] = []
    subjects["server_first"] = []
    subjects["server"] = []
    if baseline is not None:
        subjects["baseline_check"] = []
    for _ in range(rounds):
        if not extra:
            wall, _, _ = _run(["-c", "import torch, triton"], REPO)
            subjects["import"].append({"wall_s": round(wall, 3), "cpu_s": round(CPU[0], 3)})
        for name, tree, flags in (
            ("check", REPO, [*extra, "--no-server"]),
            ("check_cold", REPO, [*extra, "--cold", "--no-server"]),
            ("server_first", REPO, extra),
            *[("server", REPO, extra)] * max(1, served),
            ("baseline_check", baseline, extra),
        ):
            if name not in subjects or tree is None:
                continue
            if name == "server_first":
                _servers(REPO, "stop")
            by_server = name.startswith("server")
            before = _server_cpu(REPO) if by_server else 0.0
            wall, out, _ = _run(_check_cmd(device, flags), tree)
            cpu = CPU[0]
            if by_server:
                time.sleep(1.2)  # the template reaps its forks once a second
                cpu += _server_cpu(REPO) - before
            subjects[name].append({**_phases(_verdict_json(out), wall), "cpu_s": round(cpu, 3)})
    _servers(REPO, "stop")
    if extra:
        subjects.pop("import")
    return {name: _summary(rows) for name, rows in subjects.items()}


def _summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    doc: dict[str, Any] = {"rows": rows}
    for key in ("wall_s", "cpu_s", "compile_s", "overhead_s"):
        values = [float(r[key]) for r in rows if r.get(key) is not None]
        if values:
            doc[f"median_{key}"] = round(statistics.median(values), 3)
    walls = [float(r["wall_s"]) for r in rows if r.get("wall_s") is not None]
    if walls:  # the --bench line: a full check within 4 s
        doc["wall_range_s"] = [min(walls), max(walls)]
        doc["within_4_s"] = f"{sum(w <= 4.0 for w in walls)} of {len(walls)}"
    return doc


def longlived(device: str, repeat: int, tree: Path, bench: bool) -> dict[str, Any]:
    cmd = ["-c", LONG_LIVED, str(tree), device, str(repeat), "1" if bench else "0"]
    cmd += SUBJECT
    if BENCH_SHAPES:
        cmd.append(json.dumps(BENCH_SHAPES))
    _, out, code = _run(cmd, tree)
    try:
        rows = json.loads(out.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"error": f"exit {code}: {LAST_ERR[0][-400:]}"}
    phases = [{**_phases(r["verdict"], r["wall_s"]), "cpu_s": round(r["cpu_s"], 3)} for r in rows]
    return {"first": phases[0], **_summary(phases[1:])}


def _merged(blocks: list[dict[str, Any]]) -> dict[str, Any]:
    """Long-lived blocks of one tree as one: each block's untimed first check, every timed row."""
    rows = [row for block in blocks for row in block.get("rows") or []]
    doc = {"firsts": [b.get("first") for b in blocks], **_summary(rows)}
    errors = [b["error"] for b in blocks if b.get("error")]
    if errors:
        doc["errors"] = errors
    return doc


def pool(tree: Path, slots: int, copies: int) -> dict[str, Any]:
    out = Path(tempfile.mkdtemp(prefix="ck-pool-")) / "pool.json"
    # the tree's own script, where its layout puts it (bench/ or bench/harness/)
    script = baseline.bench_script(tree, "pool_throughput.py")
    cmd = [str(script), "--problems", "vector_add"]
    cmd += ["--copies", str(copies), "--slots-per-gpu", str(slots), "--out", str(out)]
    env_gpus = os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0] or "0"
    cmd += ["--gpus", env_gpus]
    _run(cmd, tree, timeout=400)
    try:
        doc = json.loads(out.read_text())
    except (OSError, ValueError):
        return {"error": "no result"}
    row = (doc.get("rows") or [{}])[0]
    keep = ("candidates_per_min", "wall_s", "mean_check_s", "all_passed", "slots", "warmup_s")
    return {k: row.get(k) for k in keep}


def timing(tree: Path, backend: str) -> dict[str, Any]:
    cmd = ["-c", TIMING, str(tree), SOLUTIONS[backend], str(BIG)]
    _, out, code = _run(cmd, tree)
    try:
        doc = json.loads(out.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"error": f"exit {code}"}
    rungs = _rungs(doc)
    shapes = ((rungs.get("benchmark") or {}).get("details") or {}).get("shapes") or []
    medians = [s["candidate"]["median_ms"] for s in shapes if s.get("candidate")]
    result: dict[str, Any] = {"ok": doc.get("ok"), "medians_ms": medians}
    if not doc.get("ok"):
        failed = next((r for r in doc.get("rungs") or [] if r.get("ok") is False), {})
        result["failed"] = f"{failed.get('name')}: {str(failed.get('reason'))[:200]}"
    if len(medians) == 2:
        result["two_run_diff"] = abs(medians[0] - medians[1]) / min(medians)
    profile = rungs.get("profile") or {}
    ncu = ((profile.get("details") or {}).get("summary") or {}).get("duration_ms")
    result["ncu_ms"] = ncu
    if ncu and medians:
        result["harness_vs_ncu"] = [m / ncu for m in medians]
    if shapes:
        first = (shapes[0].get("rounds") or [{}])[0].get("candidate") or {}
        for key in ("lead_ms", "host_call_ms", "witness", "clocks", "stop", "runs", "timed_s"):
            if key in first:
                result[key] = first[key]
        result["timing_note"] = shapes[0].get("timing_note")
        result["per_run"] = [_run_detail(s) for s in shapes]  # the second run's too
    return result


def _run_detail(shape: dict[str, Any]) -> dict[str, Any]:
    """One timed run's lead, host call and witness, to tell a slower kernel (the kernel
    records move with the events) from a timing bias (only the events move)."""
    first = (shape.get("rounds") or [{}])[0].get("candidate") or {}
    seen = first.get("witness") or {}
    return {
        "median_ms": (shape.get("candidate") or {}).get("median_ms"),
        "lead_ms": first.get("lead_ms"),
        "host_call_ms": first.get("host_call_ms"),
        "records_ms": seen.get("median_ms"),
        "records_vs_events": seen.get("rel_diff"),
        "launch_gap_us": seen.get("launch_gap_us"),
        "lead_raised_ms": seen.get("lead_raised_ms"),
        "sm_clock_mhz": ((first.get("clocks") or {}).get("sm_clock_mhz") or {}).get("median"),
    }


def table(doc: dict[str, Any]) -> str:
    """The RESULTS.md section."""
    lines = [
        f"## {doc['date']} — verdict speed (bench/harness/check_speed.py, {doc['device']})",
        "",
        f"Machine: {doc['machine']}. Interleaved rounds: {doc['rounds']}. Baseline: "
        f"{doc.get('baseline_label') or 'none'}, measured in the same run.",
        "",
        "| subject | median wall s | wall range s (≤ 4 s) | median CPU s | median compile s "
        "| median overhead s | workers |",
        "|---|---|---|---|---|---|---|",
    ]

    def spread(row: dict[str, Any]) -> str:
        low_high = row.get("wall_range_s")
        return f"{low_high[0]:.2f}–{low_high[1]:.2f} ({row.get('within_4_s')})" if low_high else ""

    for part in ("oneshot", "bench"):
        for name, row in (doc.get(part) or {}).items():
            workers = (row.get("rows") or [{}])[0].get("workers")
            lines.append(
                f"| {part}: {name} | {row.get('median_wall_s')} | {spread(row)} "
                f"| {row.get('median_cpu_s', '')} | {row.get('median_compile_s', '')} "
                f"| {row.get('median_overhead_s', '')} | {workers or ''} |"
            )
    for name, row in (doc.get("longlived") or {}).items():
        if isinstance(row, dict) and "median_wall_s" in row:
            lines.append(
                f"| long-lived parent: {name} (after one untimed check) | {row['median_wall_s']} "
                f"| {spread(row)} | {row.get('median_cpu_s')} | {row.get('median_compile_s')} "
                f"| {row.get('median_overhead_s')} "
                f"| {(row.get('rows') or [{}])[0].get('workers')} |"
            )
    one = doc.get("oneshot") or {}
    floor = (one.get("import") or {}).get("median_wall_s")
    check = (one.get("check") or {}).get("median_wall_s")
    served = (one.get("server") or {}).get("median_wall_s")
    if floor and check:
        lines += [
            "",
            f"check / `import torch, triton`, wall: {check / floor:.2f}x (acceptance <= 1.5x).",
        ]
    if floor and served:
        lines.append(
            f"check through the check server (second call) / `import torch, triton`, wall: "
            f"{served / floor:.2f}x."
        )
    floor_cpu = (one.get("import") or {}).get("median_cpu_s")
    check_cpu = (one.get("check") or {}).get("median_cpu_s")
    if floor_cpu and check_cpu:
        lines.append(f"check / `import torch, triton`, CPU time: {check_cpu / floor_cpu:.2f}x.")
    for name, row in (doc.get("pool") or {}).items():
        lines.append(f"- pool {name}: {row}")
    for name, row in (doc.get("timing") or {}).items():
        lines.append(f"- timing {name}: {row}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench/harness/check_speed.py")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=5, help="timed checks, long-lived parent")
    parser.add_argument(
        "--baseline", default=None, help="another tree (an export), or a git revision"
    )
    parser.add_argument("--baseline-label", default="")
    parser.add_argument("--only", default="", help="oneshot,longlived,bench,pool,timing")
    parser.add_argument(
        "--problem", type=Path, default=None, help="check this problem (default: the example)"
    )
    parser.add_argument("--candidate", type=Path, default=None, help="with this candidate")
    parser.add_argument(
        "--bench-shape",
        action="append",
        default=[],
        help="KEY=INT,...: the long-lived --bench rows time this shape (repeatable)",
    )
    parser.add_argument(
        "--bench-repeat", type=int, default=3, help="timed --bench checks per block"
    )
    parser.add_argument("--blocks", type=int, default=1, help="long-lived --bench blocks per tree")
    parser.add_argument("--server-repeat", type=int, default=1, help="warm server calls per round")
    parser.add_argument("--pool-slots", default="1,3", help="slots per GPU to try (ours)")
    parser.add_argument("--pool-copies", type=int, default=24)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--results", action="store_true", help="append to bench/RESULTS.md")
    parser.add_argument("--table", type=Path, default=None, help="write the RESULTS section here")
    parser.add_argument(
        "--timing-backends", default=",".join(SOLUTIONS), help="timing: these backends"
    )
    parser.add_argument("--timing-repeat", type=int, default=1, help="timing: checks per backend")
    args = parser.parse_args(argv)
    unknown = set(args.timing_backends.split(",")) - set(SOLUTIONS) - {""}
    if unknown:
        print(f"check_speed: --timing-backends: unknown {sorted(unknown)}", file=sys.stderr)
        return 2
    spec = args.baseline  # as given: a folder or a revision
    if args.baseline is not None:  # each tree's commands run in that tree
        try:
            args.baseline = baseline.tree(args.baseline)
        except baseline.BaselineError as err:
            print(f"check_speed: {err}", file=sys.stderr)
            return 2
    if args.baseline is not None and not (args.baseline / "harness").is_dir():
        print(f"check_speed: {args.baseline} is not a ctxkernel tree", file=sys.stderr)
        return 2
    if (args.problem is None) != (args.candidate is None):
        print("check_speed: --problem and --candidate go together", file=sys.stderr)
        return 2
    for spec in args.bench_shape:
        try:
            BENCH_SHAPES.append(
                {k: int(v) for k, v in (kv.split("=", 1) for kv in spec.split(","))}
            )
        except ValueError:
            print(f"check_speed: --bench-shape {spec!r}: expected KEY=INT,...", file=sys.stderr)
            return 2
    if args.problem is not None:  # material of another repository, the same for every tree
        SUBJECT[:] = [str(args.problem.resolve()), str(args.candidate.resolve())]
    gpu = args.device == "cuda"
    parts = set(args.only.split(",")) if args.only else {"oneshot", "longlived"}
    if gpu and not args.only:
        parts |= {"bench", "pool", "timing"}
    doc: dict[str, Any] = {
        "type": "check_speed",
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{platform.node()}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}",
        "device": args.device,
        "rounds": args.rounds,
        "baseline_label": args.baseline_label or (str(spec) if spec else ""),
    }
    # one home for the whole run: the ceilings are measured once (the first --bench check)
    os.environ.setdefault("CTXKERNEL_HOME", tempfile.mkdtemp(prefix="ck-speed-home-"))
    t0 = time.perf_counter()
    if "oneshot" in parts:
        doc["oneshot"] = oneshot(args.device, args.rounds, args.baseline, [])
    if "longlived" in parts:
        doc["longlived"] = {"check": longlived(args.device, args.repeat, REPO, False)}
        if gpu:  # blocks of ours and the baseline's, alternating
            blocks: dict[str, list[dict[str, Any]]] = {"check --bench": []}
            if args.baseline is not None:
                blocks["baseline check --bench"] = []
            for _ in range(max(1, args.blocks)):
                for name, tree in (
                    ("check --bench", REPO),
                    ("baseline check --bench", args.baseline),
                ):
                    if name in blocks and tree is not None:
                        blocks[name].append(longlived(args.device, args.bench_repeat, tree, True))
            for name, runs in blocks.items():
                doc["longlived"][name] = _merged(runs)
    if "bench" in parts and gpu:
        doc["bench"] = oneshot(
            args.device,
            max(1, args.rounds - 1),
            args.baseline,
            ["--bench"],
            cold=False,
            served=args.server_repeat,
        )
    if "pool" in parts and gpu:
        doc["pool"] = {}
        for slots in [int(s) for s in args.pool_slots.split(",") if s]:
            doc["pool"][f"ours, {slots} slot(s)"] = pool(REPO, slots, args.pool_copies)
        if args.baseline is not None:
            doc["pool"]["baseline, 1 slot"] = pool(args.baseline, 1, 8)
    if "timing" in parts and gpu:
        doc["timing"] = {}
        backends = [b for b in args.timing_backends.split(",") if b]
        for repeat in range(args.timing_repeat):
            tail = f" #{repeat + 1}" if args.timing_repeat > 1 else ""
            for backend in backends:
                doc["timing"][f"ours {backend}{tail}"] = timing(REPO, backend)
                if args.baseline is not None:
                    doc["timing"][f"baseline {backend}{tail}"] = timing(args.baseline, backend)
    doc["script_s"] = round(time.perf_counter() - t0, 1)
    text = json.dumps(doc, indent=1, default=str)
    print(text)
    if args.out:
        args.out.write_text(text)
    if args.results:
        with open(REPO / "bench" / "RESULTS.md", "a") as fh:
            fh.write("\n" + table(doc))
    if args.table:
        args.table.write_text(table(doc))
    print(table(doc), file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
