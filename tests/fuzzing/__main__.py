"""`python -m fuzzing` (from tests/): the fuzzer's command line; benchmarks/fuzz.py calls it."""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from . import __doc__ as DOC
from . import code_under_test, fuzz, make_template, run_case, snapshot
from .cases import ROOT
from .pool import worker_main


def main() -> int:
    ap = argparse.ArgumentParser(description=DOC.split("\n")[0])
    ap.add_argument("--cases", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=20.0)
    ap.add_argument("--minutes", type=float, default=None,
                    help="start no case after this many minutes (the cases run in a shuffled order)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "fuzz.json"))
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--replay", help="run one case (JSON) in this process and print the result")
    a = ap.parse_args()
    if a.worker:
        worker_main(a.worker)
        return 0
    if a.replay:
        case = dict(json.loads(a.replay), id=0)
        with tempfile.TemporaryDirectory() as d:
            (Path(d) / "tmp").mkdir()
            template = make_template(Path(d))
            print(json.dumps(run_case(case, Path(d), template, snapshot(template)), indent=2))
        return 0
    code = code_under_test()
    print(f"code under test: {code}", file=sys.stderr, flush=True)
    if any(not Path(d).resolve().is_relative_to(ROOT.resolve()) for d in code.values()):
        print(f"warning: not all of that code is this tree's ({ROOT})", file=sys.stderr, flush=True)
    last = [0.0]

    def progress(done, total):
        if time.monotonic() - last[0] > 30 or done == total:
            last[0] = time.monotonic()
            print(f"{done}/{total} cases", file=sys.stderr, flush=True)

    s = fuzz(a.cases, a.seed, a.workers, a.timeout, progress=progress, minutes=a.minutes)
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(s, indent=2, default=str) + "\n")
    brief = {k: s[k] for k in ("date", "machine", "python", "sqlite", "cases", "cases_planned", "stopped_at_time_limit",
                               "seconds", "cases_per_s", "crashes",
                               "hangs", "partial_writes", "silent_partial_loads", "inputs_changed", "sidecar_files",
                               "multiline_errors", "temp_files_left", "mixed_loads", "secret_leaks",
                               "replaced_mid_load", "secret_cases", "loaded_with_caveat", "outcomes",
                               "by_format", "crash_signatures")}
    print(json.dumps(brief, indent=2))
    bad = ("crashes", "hangs", "partial_writes", "silent_partial_loads", "inputs_changed", "sidecar_files",
           "mixed_loads", "secret_leaks")
    return 0 if all(s[k] == 0 for k in bad) else 1


if __name__ == "__main__":
    sys.exit(main())
