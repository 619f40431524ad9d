#!/usr/bin/env python3
"""The gate on the GPU captures of issue 54 (benchmarks/gpu/programs.sh, group `gate`): the lab
RMSNorm forward (benchmarks/programs/gate_rmsnorm.py, 30 calls, one NVTX range each) captured
ten times as is (A/A) and with planted regressions of +3 % and +10 % more rows a launch,
interleaved in one session on one GPU; nsys SQLite exports under tests/data/programs/gate*/.

Every A/A capture is gated against every other (45 pairs, each direction once), and every
planted capture against every A/A capture, at the default 3 % threshold and at 1 %:

    python benchmarks/gate_gpu.py [--write]     # --write: benchmarks/results/gate.md

Report files are found by name: gate-aa-NN, gate-plantP-N (.nsys.sqlite, or .nsys.sqlite.xz).
"""
from __future__ import annotations

import argparse
import itertools
import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "benchmarks" / "results" / "gate.md"
THRESHOLDS = (0.03, 0.01)
_NAME = re.compile(r"^(gate-(?:aa-\d+|plant(?:3|10)-\d+))\.nsys\.sqlite(?:\.xz)?$")


def reports() -> dict[str, Path]:
    """run name -> report file: gate-aa-01 ... gate-plant3-1 ... gate-plant10-1 ..."""
    found = {}
    for p in sorted(ROOT.glob("tests/data/programs/gate*/**/*")):
        m = _NAME.match(p.name)
        if m:
            found[m.group(1)] = p
    return found


def load(db: str, files: dict[str, Path]) -> None:
    from profkit.store.ingest import ingest

    for run, path in files.items():
        ingest(db, [path], run=run)


def measure(store) -> dict:
    """Per threshold: the A/A pairs' verdicts and each planted capture's against every A/A one."""
    from profkit.analyses import gate as g

    runs = sorted(store.runs())
    aa = [r for r in runs if r.startswith("gate-aa-")]
    plants = {p: [r for r in runs if r.startswith(f"gate-plant{p}-")] for p in ("3", "10")}
    samples = {r: g.samples(store, r) for r in runs}
    facts = {r: g.facts(store, r) for r in runs}
    base = {r: g.Baseline(r, r, "", facts[r], samples[r]) for r in aa}
    calls = sorted({len(x.gpu_us) for r in runs for x in samples[r]})
    medians = {r: [sorted(x.gpu_us)[len(x.gpu_us) // 2] for x in samples[r]] for r in runs}
    out = {"aa": aa, "plants": plants, "calls": calls, "gpu": facts[runs[0]]["gpu"], "by": {}, "medians": medians}
    for t in THRESHOLDS:
        def verdicts(pairs, t=t):
            got: dict[str, int] = {}
            changes = []
            for b, r in pairs:
                res = g.gate(base[b], samples[r], facts[r], [r], threshold=t)
                got[res.verdict] = got.get(res.verdict, 0) + 1
                changes.extend(x.decision.change_pct for x in res.ranges)
            return got, changes

        row = {"aa": verdicts(list(itertools.combinations(aa, 2)))}
        for p, rs in plants.items():
            row[p] = verdicts([(b, r) for b in aa for r in rs])
        out["by"][t] = row
    return out


def render(m: dict) -> str:
    def counts(v):
        return ", ".join(f"{n} {k}" for k, n in sorted(v.items(), key=lambda kv: -kv[1]))

    def spread(xs):
        xs = sorted(xs)
        return f"{xs[0]:+.1f} % .. {xs[-1]:+.1f} % (median {xs[len(xs) // 2]:+.1f} %)" if xs else "-"

    n_aa = len(m["aa"])
    lines = [f"# The regression gate on {m['gpu'] or 'the GPU'}: A/A repeats and planted regressions", "",
             "Written by `python benchmarks/gate_gpu.py --write` from the captures under "
             "`tests/data/programs/gate*/` (benchmarks/gpu/programs.sh, group `gate`): the lab Triton RMSNorm "
             "forward (benchmarks/programs/gate_rmsnorm.py, 16384 x 4096 bf16), 30 calls a capture, each call its "
             "own NVTX range `rmsnorm_fwd`; A/A captures as is, planted ones normalise 3 % or 10 % more rows a "
             "launch (a memory-bound launch about that much longer), all interleaved in one session.", "",
             f"GPU: {m['gpu'] or 'not recorded in the reports'}; {n_aa} A/A captures, "
             f"{len(m['plants']['3'])} at +3 %, {len(m['plants']['10'])} at +10 %; "
             f"{'/'.join(map(str, m['calls']))} calls a capture. Method: docs/gate.md.", "",
             "| threshold | comparison | gates | verdicts | change per gate |", "|---|---|---:|---|---|"]
    for t, row in m["by"].items():
        for key, label in (("aa", "A/A: each capture against each other"),
                           ("3", "planted +3 % against each A/A capture"),
                           ("10", "planted +10 % against each A/A capture")):
            v, ch = row[key]
            lines.append(f"| {t:.0%} | {label} | {sum(v.values())} | {counts(v)} | {spread(ch)} |")
    lines += ["", "Median GPU time per call of each capture (µs): "
              + ", ".join(f"{r} {x[0]:.2f}" for r, x in m["medians"].items() if x) + ".", ""]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help=f"write {PAGE.relative_to(ROOT)}")
    args = ap.parse_args()
    files = reports()
    if not files:
        print("no captures under tests/data/programs/gate*/", file=sys.stderr)
        return 2
    from profkit.store.store import Store

    with tempfile.TemporaryDirectory() as tmp:
        db = str(Path(tmp) / "gate.db")
        load(db, files)
        with Store(db, readonly=True) as s:
            text = render(measure(s))
    print(text)
    if args.write:
        PAGE.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
