#!/usr/bin/env python3
"""Was the advice right? For every before/after pair shipped in profiles/, the gain `profkit
advise` predicted for the BEFORE side against the gain `profkit compare` measured.

    python3 benchmarks/advise_calibration.py [--profiles profiles] [--out benchmarks/results]

Loads profiles/ into a temporary database, labels every run, and writes advise.md and
advise.json (method: profkit/analyses/calibration.py and docs/advise.md). CPU only: the pairs are the
shipped H200 captures.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from datetime import date
from pathlib import Path

from profkit.analyses.calibration import OFF_BY, calibrate
from profkit.analyses.classify import classify
from profkit.model import peaks
from profkit.store.profiles import load_profiles
from profkit.store.store import Store

ROOT = Path(__file__).resolve().parents[1]

# (before, after, measure): the fixes the lab applied, each shipped as one run or two
PAIRS = [
    ("rmsnorm-eager-vs-triton-h200:eager", "rmsnorm-eager-vs-triton-h200:triton", "gpu"),
    ("rmsnorm-eager-vs-triton-h200:eager", "rmsnorm-eager-vs-triton-h200:liger", "gpu"),
    ("softmax-vocab-cuda-cluster-rejected-h100:compile", "softmax-vocab-cuda-cluster-rejected-h100:triton", "gpu"),
    ("rmsnorm-bwd-persistent-vs-compile-h100:compile_direct", "rmsnorm-bwd-persistent-vs-compile-h100:triton_direct",
     "gpu"),
    ("e2e-decode:eager", "e2e-decode:graph", "span"),
    ("e2e-decode:lab", "e2e-decode:graph_lab", "span"),
]
# timeline-only pairs: no counters, so no operator floor; listed with why
TIMELINE_ONLY = [("e2e-decode:eager", "e2e-decode:lab")]


def run(profiles: Path) -> dict:
    measured = peaks.read(profiles / "peaks.json") if (profiles / "peaks.json").is_file() else None
    with tempfile.TemporaryDirectory() as d:
        db = str(Path(d) / "cal.db")
        load_profiles(profiles, db)
        rows = []
        with Store(db) as s:
            for r in s.runs():
                classify(s, r)
            for before, after, measure in PAIRS:
                rows += [c.row() for c in calibrate(s, before, after, measure, measured)]
    within = [r for r in rows if r["within_25pct"]]
    return {"date": date.today().isoformat(), "pairs": rows, "within": len(within), "total": len(rows),
            "timeline_only": TIMELINE_ONLY, "off_by": OFF_BY}


def markdown(res: dict) -> str:
    lines = [f"# Advise calibration ({res['date']})", "",
             "The gain `profkit advise` predicted for the BEFORE side of each shipped before/after pair, against the "
             "gain `profkit compare` measured (H200 captures in profiles/; method: docs/advise.md). "
             f"ratio = predicted / measured; **{res['within']} of {res['total']}** within ±{100 * res['off_by']:.0f} %.",
             "", "| before -> after | measure | predicted | measured | ratio | within 25 % | basis / why off |",
             "|---|---|---|---|---|---|---|"]
    for r in res["pairs"]:
        pred = "-" if r["predicted"] is None else f"{r['predicted']:.2f}x"
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.2f}"
        note = r["why"] or r["basis"]
        lines.append(f"| `{r['before']}` -> `{r['after']}` | {r['measure']} | {pred} | {r['measured']:.2f}x | {ratio} "
                     f"| {'yes' if r['within_25pct'] else 'no'} | {note.replace('|', '/')} |")
    lines += ["", "Timeline-only pairs (no Nsight Compute counters, so no operator floor; advise names only the idle "
              "time a graph replay would remove, not the fusion gain): " +
              ", ".join(f"`{b}` -> `{a}`" for b, a in res["timeline_only"]) + ".", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--profiles", type=Path, default=ROOT / "profiles")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    a = ap.parse_args()
    res = run(a.profiles)
    (a.out / "advise.json").write_text(json.dumps(res, indent=2, default=str) + "\n")
    (a.out / "advise.md").write_text(markdown(res))
    print(markdown(res))
    sys.exit(0)
