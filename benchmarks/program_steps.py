"""Per-range timing straight from nsys SQLite exports (no profkit analysis in between): for each
NVTX range name ('step N' folded into 'step'), the host-side duration of the range, the GPU time
of the work launched inside it (kernels, copies, memsets, whole CUDA-graph launches; summed), the
span from its first GPU start to its last GPU end, and the period between consecutive ranges'
first GPU starts (what one step costs in a loop). Medians over the ranges after --skip.

    python3 benchmarks/program_steps.py REPORT.nsys.sqlite[.xz] ... [--skip 2] [--json FILE]

Used for benchmarks/results/programs.md (the calibration pairs, the fusion blocks, the gate runs).
"""
from __future__ import annotations

import argparse
import bisect
import itertools
import json
import lzma
import re
import sqlite3
import statistics
import tempfile
from pathlib import Path

ACTIVITY = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
            "CUPTI_ACTIVITY_KIND_GRAPH_TRACE")
LAUNCH = ("CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_DRIVER")


def open_report(path: Path) -> sqlite3.Connection:
    if path.suffix == ".xz":
        with tempfile.NamedTemporaryFile(suffix=".sqlite", delete=False) as tmp:
            tmp.write(lzma.decompress(path.read_bytes()))
        path = Path(tmp.name)
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True)


def tables(con) -> set[str]:
    return {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}


def ranges(con) -> list[tuple[str, int, int]]:
    have = tables(con)
    if "NVTX_EVENTS" not in have:
        return []
    rows = con.execute("SELECT e.start, e.end, COALESCE(e.text, s.value) FROM NVTX_EVENTS e "
                       "LEFT JOIN StringIds s ON s.id = e.textId WHERE e.end IS NOT NULL AND e.eventType IN (59, 60)")
    return sorted((name, s, e) for s, e, name in rows if name)


def gpu_work(con) -> list[tuple[int, int, int]]:
    """(launch start on the host, GPU start, GPU end) of every GPU activity with a launching call."""
    have = tables(con)
    launch: dict[int, int] = {}
    for t in LAUNCH:
        if t in have:
            launch.update(con.execute(f"SELECT correlationId, start FROM {t}"))
    out = []
    for t in ACTIVITY:
        if t in have:
            for corr, s, e in con.execute(f"SELECT correlationId, start, end FROM {t}"):
                if corr in launch:
                    out.append((launch[corr], s, e))
    out.sort()
    return out


def med(xs):
    return statistics.median(xs) if xs else None


def summarize(path: Path, skip: int = 2) -> dict:
    con = open_report(path)
    work = gpu_work(con)
    starts = [w[0] for w in work]
    groups: dict[str, list[tuple[int, int]]] = {}
    for name, s, e in ranges(con):
        key = "step" if re.fullmatch(r"step \d+", name) else name
        groups.setdefault(key, []).append((s, e))
    out = {"report": path.name, "ranges": {}}
    for key, rs in groups.items():
        rs.sort()
        rows = []
        for s, e in rs:
            lo, hi = bisect.bisect_left(starts, s), bisect.bisect_right(starts, e)
            inside = work[lo:hi]
            busy = sum(w[2] - w[1] for w in inside)
            first = min((w[1] for w in inside), default=None)
            last = max((w[2] for w in inside), default=None)
            rows.append({"host_ns": e - s, "gpu_ns": busy, "first": first, "last": last, "launches": len(inside)})
        kept = rows[skip:] if len(rows) > skip + 2 else rows
        firsts = [r["first"] for r in rows if r["first"] is not None]
        periods = [b - a for a, b in itertools.pairwise(firsts)]
        periods = periods[skip:] if len(periods) > skip + 2 else periods
        host_starts = [s for s, _ in rs]
        host_periods = [b - a for a, b in itertools.pairwise(host_starts)]
        host_periods = host_periods[skip:] if len(host_periods) > skip + 2 else host_periods
        out["ranges"][key] = {
            "n": len(rows), "used": len(kept),
            "host_ms": med([r["host_ns"] / 1e6 for r in kept]),
            "gpu_busy_ms": med([r["gpu_ns"] / 1e6 for r in kept]),
            "gpu_span_ms": med([(r["last"] - r["first"]) / 1e6 for r in kept if r["first"] is not None]),
            "gpu_period_ms": med([p / 1e6 for p in periods]),
            "host_period_ms": med([p / 1e6 for p in host_periods]),
            "launches": med([r["launches"] for r in kept]),
            "gpu_busy_all_ms": [round(r["gpu_ns"] / 1e6, 4) for r in rows],
        }
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("reports", nargs="+", type=Path)
    p.add_argument("--skip", type=int, default=2, help="ranges of a name left out at the start (warm-up)")
    p.add_argument("--json", type=Path)
    a = p.parse_args()
    res = [summarize(r, a.skip) for r in a.reports]
    f = lambda v: "-" if v is None else f"{v:.4f}"
    print(f"{'report':48s} {'range':24s} {'n':>4s} {'host ms':>9s} {'GPU busy':>9s} {'GPU span':>9s} "
          f"{'GPU period':>10s} {'host period':>11s} {'launch':>6s}")
    for r in res:
        for k, v in r["ranges"].items():
            print(f"{r['report'][:48]:48s} {k[:24]:24s} {v['n']:4d} {f(v['host_ms']):>9s} {f(v['gpu_busy_ms']):>9s} "
                  f"{f(v['gpu_span_ms']):>9s} {f(v['gpu_period_ms']):>10s} {f(v['host_period_ms']):>11s} "
                  f"{v['launches'] if v['launches'] is not None else '-':>6}")
    if a.json:
        a.json.write_text(json.dumps(res, indent=1) + "\n")


if __name__ == "__main__":
    main()
