#!/usr/bin/env python3
"""The gate's false-alarm rate and power, by simulation over recorded per-call GPU times
(docs/gate.md, "How well it decides"): A/A comparisons (one run's calls drawn into two
samples) and planted 2 %, 5 % and 10 % slow-downs (one sample's times multiplied).

    python benchmarks/gate_simulation.py            # print the block
    python benchmarks/gate_simulation.py --write    # and replace it in docs/gate.md

tests/test_gate.py runs the same code and holds docs/gate.md to what it computes.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from profdata import unpack  # noqa: E402 (the packed capture sets of tests/data, as the tests unpack them)

DOC = ROOT / "docs" / "gate.md"
BEGIN, END = "<!-- simulation: begin (benchmarks/gate_simulation.py --write) -->", "<!-- simulation: end -->"
# the lab timelines tests/test_gate.py reads (tests/data/gate/gate.tar.xz), 12 calls a variant in
# its NVTX range, both GPUs
RUNS = ("rope-six-variants-h100", "rmsnorm_rope-h100-fast-launcher",
        "rmsnorm_rope-h100-slow-launcher", "rmsnorm_rope-h200")
# (draw, threshold, draws a range): the default threshold in both regimes, and a threshold under
# the smallest planted slow-down (with 3 %, +2 % is within tolerance: `pass` is the right answer)
SETTINGS = (("split", 0.03, 200), ("resample", 0.03, 50), ("resample", 0.01, 50))
SLOWDOWNS = (0.02, 0.05, 0.10)


def recorded(store) -> tuple[dict[str, list[float]], list[dict]]:
    """{run/range: GPU time per call} over RUNS, and each run's facts (GPU, driver, date)."""
    from profkit.analyses import gate as g

    ranges, facts = {}, []
    for run in RUNS:
        for r in g.samples(store, run):
            ranges[f"{run}/{r.path}"] = r.gpu_us
        meta = store.run_meta(run)
        facts.append({"run": run, "gpu": meta.get("gpu_name"), "driver": meta.get("driver"),
                      "torch": meta.get("torch_version"), "date": (meta.get("captured_at") or "")[:10],
                      "calls": sorted({len(r.gpu_us) for r in g.samples(store, run)})})
    return ranges, facts


def simulate(ranges: dict[str, list[float]]) -> dict:
    from profkit.analyses import gate as g

    return {f"{draw} {t:.0%}": g.simulate(ranges, draw=draw, threshold=t, trials=n, slowdowns=SLOWDOWNS, seed=0)
            for draw, t, n in SETTINGS}


def render(results: dict, facts: list[dict]) -> str:
    def pct(x):
        return f"{100 * x:.1f} %"

    lines = [BEGIN, "",
             "Recorded samples: " + "; ".join(f"`{f['run']}` ({f['gpu']}, driver {f['driver']}, torch {f['torch']}, "
                                               f"captured {f['date']}, {'/'.join(map(str, f['calls']))} calls a range)"
                                               for f in facts) + ".", "",
             "| draw, threshold | calls a side | comparisons | A/A false alarms (regression) | A/A pass | "
             "A/A undecided | "
             + " | ".join(f"power at +{x:.0%} (regression)" for x in SLOWDOWNS) + " |",
             "|---|---|---:|---:|---:|---:|" + "---:|" * len(SLOWDOWNS)]
    for draw, r in results.items():
        power = " | ".join(f"{pct(r['planted'][f'{x:.0%}']['regression'])} "
                           f"({pct(r['planted'][f'{x:.0%}']['undecided'])} undecided)" for x in SLOWDOWNS)
        lines.append(f"| {draw} | {'/'.join(map(str, r['calls_a_side']))} | {r['comparisons']:,} | "
                     f"{pct(r['aa']['regression'])} | {pct(r['aa']['pass'])} | {pct(r['aa']['undecided'])} | {power} |")
    first = next(iter(results.values()))
    lines += ["", f"{len(facts)} runs, {first['ranges']} ranges; draws a range: "
                  + ", ".join(f"{d} {t:.0%}: {n}" for d, t, n in SETTINGS) + "; seed 0.", "", END]
    return "\n".join(lines)


def block_in(doc: str) -> str:
    i, j = doc.index(BEGIN), doc.index(END)
    return doc[i:j + len(END)]


def load_store(root: Path):
    """RUNS loaded from the gate set, unpacked under `root`."""
    from profkit.store.profiles import load_profiles
    from profkit.store.store import Store

    data, runs = unpack("gate", root), root / "runs"
    runs.mkdir()
    for run in RUNS:
        (runs / run).symlink_to(data / run, target_is_directory=True)
    db = root / "sim.db"
    load_profiles(runs, str(db))
    return Store(str(db))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help=f"replace the block in {DOC.relative_to(ROOT)}")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        with load_store(Path(tmp)) as s:
            ranges, facts = recorded(s)
    text = render(simulate(ranges), facts)
    print(text)
    if args.write:
        doc = DOC.read_text(encoding="utf-8")
        DOC.write_text(doc.replace(block_in(doc), text), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
