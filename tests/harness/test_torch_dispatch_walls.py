"""The op recorder's blind spots closed (``harness/worker/torchstate.py``, ``guards.OpRecorder``,
``library_share.host_reads``); end to end, the planted cheats c01_custom_op_*,
c01_numpy_host_compute and c08_lingering_*/c08_recorder_switched_off show each caught.

What changes torch's process-wide state (a mode left on the stack, a kernel registered for
an ATen op, the switches wrapped) runs in a child process of its own."""

from __future__ import annotations

from conftest import run_python

from harness.problems.library_share import measure_cpu, measure_gpu


def test_a_mode_left_on_the_stack_is_named_and_popped() -> None:
    out = run_python(
        """
        import torch
        from torch.overrides import TorchFunctionMode
        from torch.utils._python_dispatch import TorchDispatchMode
        from harness.worker.torchstate import DispatchState

        class Watch(TorchFunctionMode):
            def __torch_function__(self, func, types, args=(), kwargs=None):
                return func(*args, **(kwargs or {}))

        class Spy(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                return func(*args, **(kwargs or {}))

        state = DispatchState.take()
        assert state.differences() == []
        Watch().__enter__()
        Spy().__enter__()
        found = state.differences()
        print(len(found))
        print("\\n".join(found))
        print(torch._C._len_torch_function_stack(), torch._C._len_torch_dispatch_stack())
        """
    )
    lines = out.splitlines()
    assert lines[0] == "2"
    assert "torch function mode (Watch)" in out and "torch dispatch mode (Spy)" in out
    assert lines[-1] == "0 0"  # popped: nothing of the harness's runs under them again


def test_a_kernel_registered_for_an_op_the_worker_runs_is_reported() -> None:
    out = run_python(
        """
        import torch
        from harness.worker.torchstate import DispatchState

        state = DispatchState.take()
        lib = torch.library.Library("aten", "IMPL")
        lib.impl("zero_", lambda t: t, "CPU")
        print("\\n".join(state.differences()))
        print("again:", state.differences())
        """
    )
    assert "replaced a kernel of aten::zero_" in out
    assert "again: []" in out  # reported once


def test_the_switches_report_candidate_use_during_a_call_only() -> None:
    out = run_python(
        """
        import torch
        from harness.worker import torchstate

        active = [False]
        seen = []
        torchstate.watch_switches(lambda: active[0], lambda kind, message: seen.append(message))
        off = getattr(torch._C, "Disable" + "TorchFunction")
        with off():
            pass
        print("idle:", len(seen))
        active[0] = True
        with off():
            pass
        with torch.utils._python_dispatch._disable_current_modes():
            pass
        x = torch.ones(2)
        after = torch._C._dispatch_keyset_full_after(torch._C.DispatchKey.Python)
        keys = torch._C._dispatch_keys(x) & after
        torch.ops.aten.add.Tensor.redispatch(keys, x, x)
        print("\\n".join(seen))
        seen.clear()

        # the recorder's own redispatch (an op of the candidate's, its modes back on)
        from harness.worker.guards import OpRecorder

        @torch.library.custom_op("ckt::twice", mutates_args=())
        def twice(t: torch.Tensor) -> torch.Tensor:
            return t * 2

        with torch.no_grad(), OpRecorder():
            twice(x)
        print("recorder:", len(seen))
        """
    )
    assert "idle: 0" in out
    assert "switched the op recorder off (torch._C.DisableTorchFunction)" in out
    assert "(torch.utils._python_dispatch._disable_current_modes)" in out
    assert "(torch._ops.OpOverload.redispatch)" in out
    assert "recorder: 0" in out


def test_ops_inside_a_custom_op_are_recorded() -> None:
    out = run_python(
        """
        import torch
        from harness.worker.guards import OpRecorder

        @torch.library.custom_op("ckt::vsum", mutates_args=())
        def vsum(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            return x + y

        recorder = OpRecorder()
        x = torch.ones(8)
        with torch.no_grad(), recorder:
            out = vsum(x, x)
        print(float(out.sum()), sorted(recorder.aten))
        """
    )
    assert out.startswith("16.0")
    assert "ckt::vsum" in out and "aten::add" in out


def test_host_reads_count_unless_the_interpreters_launcher_reads_inside_its_launch() -> None:
    out = run_python(
        """
        import os
        os.environ["TRITON_INTERPRET"] = "1"
        import torch
        import triton
        import triton.language as tl
        from triton.profiler import metric
        from harness.backends.triton import TritonBackend
        from harness.worker.guards import OpRecorder

        backend = TritonBackend()
        counter = backend.prepare_worker("cpu")
        recorder = OpRecorder(lambda: counter.depth > 0, backend.host_launcher)
        box = {}

        @triton.jit
        def copy(src, dst, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.store(dst + offs, tl.load(src + offs, mask=offs < n), mask=offs < n)

        @triton.jit
        def helper_reads(x_ptr):  # a triton helper's tolist() from the kernel body
            box["list"] = metric._scalar_or_vector_value(box["x"], lambda v: v)

        @triton.jit
        def body_reads(x_ptr):  # the kernel body's own numpy()
            box["array"] = box["x"].numpy()

        # a function whose code is the interpreter's own file, called by the kernel body
        launcher = {}
        path = os.path.join(os.path.dirname(triton.__file__), "runtime", "interpreter.py")
        exec(compile("def read(t):\\n    return t.numpy()", path, "exec"), launcher)

        @triton.jit
        def spoof_reads(x_ptr):
            launcher["read"](box["x"])

        x = torch.ones(100)
        box["x"] = x
        out = torch.empty_like(x)
        with recorder:
            copy[(1,)](x, out, 100, BLOCK=128)  # the interpreter copies its arguments
            print("honest", dict(recorder.host))
            x.numpy().sum()
            x[:3].tolist()
            [v.item() for v in x[:5]]
            print("host", dict(recorder.host))
            recorder.reset()
            helper_reads[(1,)](x)
            print("helper", dict(recorder.host))
            recorder.reset()
            body_reads[(1,)](x)
            spoof_reads[(1,)](x)
            print("body", dict(recorder.host))
        """
    )
    lines = dict(line.split(" ", 1) for line in out.splitlines())
    assert lines["honest"] == "{}", out
    assert "'numpy': 100" in lines["host"] and "'tolist': 3" in lines["host"], out
    assert "'item': 5" in lines["host"], out
    assert lines["helper"] == "{'tolist': 100}", out
    assert lines["body"] == "{'numpy': 200}", out


def test_host_reads_are_library_work_in_both_shares() -> None:
    call = {"input_elements": 200, "aten_elements": {}, "host_elements": {"numpy": 200}}
    cpu = measure_cpu(call)
    assert cpu is not None and cpu.own == 0.0
    assert "host code (Tensor.numpy)" in cpu.describe()
    gpu_call = {
        **call,
        "kernels": [["copy_kernel", 10.0, 1]],
        "own_kernels": ["copy_kernel"],
    }
    gpu = measure_gpu(gpu_call, "", exact=True)
    assert gpu is not None and gpu.own == 0.0  # the one kernel is its own; the work was not
    honest = measure_gpu({**gpu_call, "host_elements": {}}, "", exact=True)
    assert honest is not None and honest.own == 1.0


def test_the_ledger_counts_what_no_mode_sees_once() -> None:
    import torch

    from harness.problems.library import is_compute
    from harness.worker.torchstate import OpLedger

    ledger = OpLedger(is_compute)
    x = torch.ones(100)
    with ledger:
        with torch._C._DisableTorchDispatch(), torch._C.DisableTorchFunction():
            x + x
        torch._foreach_mul([x, x], 2.0)  # tensors inside a list
        torch.softmax(x, 0)  # an op that calls others: counted once
        x.clone()  # not compute
    assert not ledger.stopped
    assert ledger.elements["aten::add"] == 200
    assert ledger.elements["aten::mul"] == 200  # the list op records its per-tensor ops
    assert ledger.elements["aten::softmax"] == 100 and "aten::_softmax" not in ledger.elements
    assert "aten::clone" not in ledger.calls
