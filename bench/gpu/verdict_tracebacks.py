"""Print the tracebacks a harness verdict carries (a rung's harness error), from a log that
holds the verdict's JSON line among progress lines: `python3 verdict_tracebacks.py LOG`."""

import json
import sys


def main(path: str) -> None:
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            if not line.startswith("{"):
                continue
            try:
                verdict = json.loads(line)
            except ValueError:
                continue
            for rung in verdict.get("rungs", []):
                trace = (rung.get("details") or {}).get("traceback")
                if trace:
                    print(f"== {path}: {rung.get('name')}\n{trace}")


if __name__ == "__main__":
    main(sys.argv[1])
