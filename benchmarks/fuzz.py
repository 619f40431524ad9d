#!/usr/bin/env python3
"""Fuzz every report parser through the real ingest (the fuzzer lives in tests/fuzzing/,
where the tests import it; this is its command line).

    python benchmarks/fuzz.py [--cases 10000] [--seed 1] [--workers 2] [--timeout 20]
                              [--out benchmarks/results/fuzz.json]
    python benchmarks/fuzz.py --replay '{"format": ..., "mutation": ..., ...}'   # one case, in-process
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from fuzzing.__main__ import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
