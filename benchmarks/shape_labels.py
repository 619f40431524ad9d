"""Share of GPU time labelled on timeline-only traces, without and with the operator model.

    python benchmarks/shape_labels.py TRACE [TRACE ...] [--json OUT]

Each trace loads into a fresh database; `label_rows` labels it twice: with the shape labels
switched off (what counters and the timeline alone say) and on (profkit/analyses/shape_labels).
Per trace: kernels, the share of kernels tied to an operator with shapes, the GPU-time share
labelled (anything but `unknown`) before and after, and the largest remaining unknown reasons.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections import Counter
from pathlib import Path


def measure(path: Path) -> dict:
    from profkit.analyses import classify, shape_labels
    from profkit.store.ingest import ingest
    from profkit.store.store import Store

    with tempfile.TemporaryDirectory() as d:
        db = Path(d) / "t.db"
        ingest(db, [path], run="t")
        with Store(db) as s:
            dur = {r["kernel_id"]: r["duration_ns"] or 0 for r in s.query("SELECT kernel_id, duration_ns FROM kernels")}
            gpu = s.query("SELECT gpu_name FROM run")[0]["gpu_name"]
            tied = s.query("SELECT count(*) n FROM op_launch")[0]["n"]
            after = classify.label_rows(s, "t")
            real = shape_labels.relabel
            shape_labels.relabel = lambda store, run, rows, counted: rows
            try:
                before = classify.label_rows(s, "t")
            finally:
                shape_labels.relabel = real
    total = sum(dur.values()) or 1

    def share(rows):
        return sum(dur[r["kernel_id"]] for r in rows if r["label"] != "unknown") / total

    left: Counter = Counter()
    for r in after:
        if r["label"] == "unknown":
            why = r["reason"].split("from shapes: ")[-1] if "from shapes: " in r["reason"] else r["reason"]
            left[why[:90]] += dur[r["kernel_id"]] / total
    labels: Counter = Counter()
    for r in after:
        labels[r["label"]] += dur[r["kernel_id"]] / total
    return {"trace": str(path), "gpu": gpu, "kernels": len(dur), "tied_to_ops": tied / max(len(dur), 1),
            "labelled_before": share(before), "labelled_after": share(after),
            "labels_after": {k: round(v, 4) for k, v in labels.most_common()},
            "unknown_left": [(k, round(v, 4)) for k, v in left.most_common(3)]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("traces", nargs="+", type=Path)
    ap.add_argument("--json", type=Path)
    a = ap.parse_args(argv)
    rows = []
    print(f"{'trace':<58} {'GPU':<24} {'kernels':>7} {'tied':>5} {'before':>7} {'after':>6}")
    for p in a.traces:
        try:
            r = measure(p)
        except Exception as e:  # noqa: BLE001 - a trace profkit refuses is reported, the others go on
            print(f"{p.name[:58]:<58} refused: {str(e)[:80]}")
            continue
        rows.append(r)
        print(f"{p.name[:58]:<58} {(r['gpu'] or '-')[:24]:<24} {r['kernels']:>7} {100 * r['tied_to_ops']:>4.0f}% "
              f"{100 * r['labelled_before']:>6.1f}% {100 * r['labelled_after']:>5.1f}%")
        for why, v in r["unknown_left"]:
            print(f"    unknown {100 * v:5.1f}%: {why}")
    if a.json:
        a.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
