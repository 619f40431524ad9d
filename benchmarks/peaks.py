#!/usr/bin/env python3
"""Write profiles/peaks.json (the measured ceilings the roofline draws dashed) from the
benchmark results in benchmarks/results/*.json.

    python3 benchmarks/peaks.py [-o profiles/peaks.json]
"""
from __future__ import annotations

import argparse
from pathlib import Path

from profkit.model import peaks

ROOT = Path(__file__).resolve().parents[1]

if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("-o", "--output", type=Path, default=ROOT / "profiles" / "peaks.json")
    a = ap.parse_args()
    rows = peaks.from_results((ROOT / "benchmarks" / "results").glob("*.json"))
    print(peaks.write(a.output, rows), f"{len(rows)} peaks")
