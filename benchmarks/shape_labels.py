"""Share of GPU time labelled on timeline-only traces: without, with the operator model, and
with the kernel families as well.

    python benchmarks/shape_labels.py TRACE [TRACE ...] [--json OUT]
    python benchmarks/shape_labels.py --agreement REPORT [REPORT ...]

Each trace loads into a fresh database; `label_rows` labels it three times: with the shape and
family labels switched off (what counters and the timeline alone say), with the shape labels
only (profkit/analyses/shape_labels), and with both (shape_labels.family_labels). Per trace:
kernels, the share of kernels tied to an operator with shapes, the GPU-time share labelled
(anything but `unknown`) each way, and the largest remaining unknown reasons.

--agreement: reports with counters (ncu); per launch the label its counters give against the one
its kernel family and timeline facts give with the counters dropped (profkit.analyses.opcheck.
family_labels): the share of GPU time the family labels, the share of that which agrees (strict,
and with latency / launch_overhead / occupancy as one), and the largest disagreements.
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
            real, fam = shape_labels.relabel, shape_labels.family_labels
            shape_labels.family_labels = lambda store, run, rows: None
            try:
                shapes = classify.label_rows(s, "t")
                shape_labels.relabel = lambda store, run, rows, counted: rows
                before = classify.label_rows(s, "t")
            finally:
                shape_labels.relabel, shape_labels.family_labels = real, fam
    total = sum(dur.values()) or 1

    def share(rows):
        return sum(dur[r["kernel_id"]] for r in rows if r["label"] != "unknown") / total

    left: Counter = Counter()
    for r in after:
        if r["label"] == "unknown":
            why = r["reason"]
            for cut in ("from shapes: ", "from the kernel family: "):
                why = why.split(cut)[-1] if cut in why else why
            left[why[:90]] += dur[r["kernel_id"]] / total
    labels: Counter = Counter()
    by_family = 0.0
    for r in after:
        labels[r["label"]] += dur[r["kernel_id"]] / total
        by_family += dur[r["kernel_id"]] / total if '"rule": "family"' in r["evidence"] else 0.0
    return {
        "trace": str(path),
        "gpu": gpu,
        "kernels": len(dur),
        "tied_to_ops": tied / max(len(dur), 1),
        "labelled_before": share(before),
        "labelled_shapes": share(shapes),
        "labelled_after": share(after),
        "from_family": round(by_family, 4),
        "labels_after": {k: round(v, 4) for k, v in labels.most_common()},
        "unknown_left": [(k, round(v, 4)) for k, v in left.most_common(3)],
    }


def agreement(paths: list[Path]) -> dict:
    """The family labels against the counters' over reports with counters."""
    import lzma
    import shutil

    from profkit.analyses import opcheck
    from profkit.store.ingest import ingest
    from profkit.store.store import Store

    rows: list[dict] = []
    per: dict[str, tuple[float, float, float]] = {}
    with tempfile.TemporaryDirectory() as d:
        for i, p in enumerate(paths):
            src = p
            if p.name.endswith(".csv.xz"):  # ingest reads .ncu-rep.xz itself, not an xz'd CSV
                src = Path(d) / p.name[:-3]
                with lzma.open(p) as f, open(src, "wb") as g:
                    shutil.copyfileobj(f, g)
            db = Path(d) / f"{i}.db"
            ingest(db, [src], run="t")
            with Store(db) as s:
                mine = opcheck.family_labels(s, "t")
            for r in mine:
                r["report"] = p.name
            rows += mine
            per[p.name] = (sum(r["gpu_ns"] for r in mine), *opcheck.family_agreement(mine))
    cover, strict = opcheck.family_agreement(rows)
    _, loose = opcheck.family_agreement(rows, strict=False)
    dis: Counter = Counter()
    for r in rows:
        if r["family"] is not None and r["family"] != r["counters"]:
            dis[r["family_key"], r["family"], r["counters"], r["kernel"][:60]] += r["gpu_ns"]
    left: Counter = Counter(r["family_key"] for r in rows if r["family"] is None)
    return {
        "launches": len(rows),
        "gpu_ns": sum(r["gpu_ns"] for r in rows),
        "labelled": cover,
        "agree_strict": strict,
        "agree_no_roof_as_one": loose,
        "per_report": per,
        "disagree": dis.most_common(15),
        "unlabelled_families": left.most_common(),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("traces", nargs="+", type=Path)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--agreement", action="store_true", help="the family labels against counters")
    a = ap.parse_args(argv)
    if a.agreement:
        res = agreement(a.traces)
        for name, (ns, cover, agree) in res["per_report"].items():
            print(f"{name[:60]:<60} {ns / 1e6:8.2f} ms  family labels {100 * cover:5.1f} %  agree {100 * agree:5.1f} %")
        print(
            f"all: {res['launches']} launches, {res['gpu_ns'] / 1e6:.1f} ms; family labels {100 * res['labelled']:.1f} %"
            f" of it; agree {100 * res['agree_strict']:.1f} % strict, {100 * res['agree_no_roof_as_one']:.1f} %"
            " with latency/launch_overhead/occupancy as one"
        )
        for (fam, mine, theirs, k), ns in res["disagree"]:
            print(f"    {ns / 1e3:8.0f} us  {fam}: family {mine}, counters {theirs}: {k}")
        print("    unlabelled:", ", ".join(f"{f} ({n})" for f, n in res["unlabelled_families"]))
        if a.json:
            a.json.write_text(json.dumps(res, indent=1, default=str))
        return 0
    rows = []
    print(f"{'trace':<58} {'GPU':<24} {'kernels':>7} {'tied':>5} {'before':>7} {'shapes':>6} {'+family':>7}")
    for p in a.traces:
        try:
            r = measure(p)
        except Exception as e:  # noqa: BLE001 - a trace profkit refuses is reported, the others go on
            print(f"{p.name[:58]:<58} refused: {str(e)[:80]}")
            continue
        rows.append(r)
        print(
            f"{p.name[:58]:<58} {(r['gpu'] or '-')[:24]:<24} {r['kernels']:>7} {100 * r['tied_to_ops']:>4.0f}% "
            f"{100 * r['labelled_before']:>6.1f}% {100 * r['labelled_shapes']:>5.1f}% {100 * r['labelled_after']:>6.1f}%"
            f"  (family {100 * r['from_family']:.1f}%)"
        )
        for why, v in r["unknown_left"]:
            print(f"    unknown {100 * v:5.1f}%: {why}")
    if a.json:
        a.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
