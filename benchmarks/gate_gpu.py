#!/usr/bin/env python3
"""The gate on separate GPU captures (issue 54): the lab RMSNorm forward
(benchmarks/programs/gate_rmsnorm.py, 16384 x 4096 bf16, 30 calls, one NVTX range
`rmsnorm_fwd` each) captured ten times as is (A/A) and twice each with a planted regression
(+3 % and +10 % more rows a launch), interleaved in one session on one GPU
(benchmarks/gpu/programs.sh, group `gate`); nsys SQLite exports, xz'd, kept as
rmsnorm_fwd-h100-repeats/ in tests/data/gate/gate.tar.xz (README.md beside it has the capture
order), unpacked to a temporary folder for the run.

Protocol, at the default 3 % threshold and at 1 %, GPU time per call:
- A/A: every ordered pair of A/A captures, the first as the baseline (10 captures: 90 gates);
  a `regression` is a false alarm. The same pairs by host time per call, at 3 %.
- planted: each planted capture against each A/A capture as the baseline (2 x 10 gates a size);
  a `regression` is a catch. And both planted captures of a size pooled against each A/A
  baseline (10 gates a size): what `--rerun` does with one re-capture.
- time: the gate's own decision (baseline samples in hand) per gate, and the CLI end to end
  on one pair (ingest, baseline save, ingest, gate), each a process of its own.

    python benchmarks/gate_gpu.py [FOLDER] [--write]     # --write: benchmarks/results/gate.md

Files are found by name: ...aa-NN..., ...planted-3pct-N... / ...planted-10pct-N... (or the
capture script's plant3-N / plant10-N), .nsys.sqlite or .nsys.sqlite.xz.
"""

from __future__ import annotations

import argparse
import itertools
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from profdata import unpack  # noqa: E402 (the packed capture sets of tests/data, as the tests unpack them)

PAGE = ROOT / "benchmarks" / "results" / "gate.md"
REPEATS = "rmsnorm_fwd-h100-repeats"  # the folder in tests/data/gate/gate.tar.xz
THRESHOLDS = (0.03, 0.01)
PLANTS = ("3", "10")
ROWS = 16384  # gate_rmsnorm.py's --rows: a planted capture launches ROWS + ceil(ROWS * P / 100) rows
_REPORT = re.compile(r"^(?P<run>.+)\.nsys\.sqlite(?:\.xz)?$")
_AA = re.compile(r"(?:^|-)aa-\d+$")
_PLANT = re.compile(r"(?:^|-)plant(?:ed-)?(?P<p>3|10)(?:pct)?-\d+$")


def reports(folder: Path) -> dict[str, Path]:
    """run name (the file's name less .nsys.sqlite[.xz]) -> report file, A/A and planted only."""
    found = {}
    for p in sorted(folder.rglob("*")):
        m = _REPORT.match(p.name)
        if m and (_AA.search(m["run"]) or _PLANT.search(m["run"])):
            found[m["run"]] = p
    return found


def kind(run: str) -> str:
    """'aa', '3' or '10'."""
    m = _PLANT.search(run)
    return m["p"] if m else "aa"


def planted_pct(p: str) -> float:
    """The planted size in rows a launch, as gate_rmsnorm.py rounds it."""
    return 100.0 * ((ROWS * int(p) + 99) // 100) / ROWS


def load(db: str, files: dict[str, Path]) -> None:
    from profkit.store.ingest import ingest

    for run, path in files.items():
        ingest(db, [path], run=run)


def measure(store) -> dict:
    from profkit.analyses import gate as g

    runs = sorted(store.runs())
    aa = [r for r in runs if kind(r) == "aa"]
    plants = {p: [r for r in runs if kind(r) == p] for p in PLANTS}
    samples = {r: g.samples(store, r) for r in runs}
    facts = {r: g.facts(store, r) for r in runs}
    base = {r: g.Baseline(r, r, "", facts[r], samples[r]) for r in aa}
    pooled = {p: g.pooled([samples[r] for r in rs]) for p, rs in plants.items() if len(rs) > 1}
    seconds: list[float] = []

    def gates(pairs, threshold, by="gpu") -> list:
        out = []
        for b, r in pairs:
            mine, rf = (pooled[r[1:]], facts[plants[r[1:]][0]]) if r.startswith("*") else (samples[r], facts[r])
            t0 = time.perf_counter()
            res = g.gate(base[b], mine, rf, [r], threshold=threshold, by=by)
            seconds.append(time.perf_counter() - t0)
            out.append(res)
        return out

    rows = []
    for t in THRESHOLDS:
        rows.append((t, "gpu", "A/A: every ordered pair", None, gates(itertools.permutations(aa, 2), t)))
        for p, rs in plants.items():
            rows.append((t, "gpu", f"planted +{p} % against each A/A baseline", p, gates(itertools.product(aa, rs), t)))
        for p in pooled:
            rows.append(
                (
                    t,
                    "gpu",
                    f"planted +{p} %, its {len(plants[p])} captures pooled, against each A/A baseline",
                    p,
                    gates([(b, "*" + p) for b in aa], t),
                )
            )
    rows.append((0.03, "host", "A/A: every ordered pair", None, gates(itertools.permutations(aa, 2), 0.03, "host")))
    per_call = {
        r: (
            statistics.median(samples[r][0].gpu_us),
            g.spread(samples[r][0].gpu_us),
            statistics.median(samples[r][0].host_us or [float("nan")]),
        )
        for r in runs
    }
    return {
        "aa": aa,
        "plants": plants,
        "gpu": facts[runs[0]]["gpu"],
        "rows": rows,
        "per_call": per_call,
        "calls": sorted({len(x.gpu_us) for r in runs for x in samples[r]}),
        "paths": sorted({x.path for r in runs for x in samples[r]}),
        "gate_s": seconds,
    }


def cli_times(files: dict[str, Path], tmp: str) -> dict[str, float]:
    """Seconds of each CLI step on one A/A pair, each a process of its own (python start included)."""
    aa = [r for r in files if kind(r) == "aa"]
    db = str(Path(tmp) / "cli.db")
    steps = {
        "ingest baseline capture": ["ingest", str(files[aa[0]]), "--run", aa[0]],
        "baseline save": ["baseline", "save", "main", "--run", aa[0]],
        "ingest run": ["ingest", str(files[aa[1]]), "--run", aa[1]],
        "gate": ["gate", "--against", "main", "--run", aa[1]],
    }
    out = {}
    for name, args in steps.items():
        t0 = time.perf_counter()
        p = subprocess.run([sys.executable, "-m", "profkit.cli", *args, "--db", db], capture_output=True, text=True)
        out[name] = time.perf_counter() - t0
        if p.returncode != 0:
            raise SystemExit(f"profkit {' '.join(args)}: exit {p.returncode}: {p.stderr.strip() or p.stdout.strip()}")
    return out


def _counts(results) -> str:
    got: dict[str, int] = {}
    for r in results:
        got[r.verdict] = got.get(r.verdict, 0) + 1
    return ", ".join(f"{n} {k}" for k, n in sorted(got.items(), key=lambda kv: -kv[1]))


def _span(xs, fmt="{:+.1f}") -> str:
    xs = sorted(x for x in xs if x is not None)
    if not xs:
        return "-"
    return f"{fmt.format(xs[0])} .. {fmt.format(xs[-1])} (median {fmt.format(statistics.median(xs))})"


def table(m: dict) -> list[str]:
    """The verdict table's rows (tests/test_gate.py holds the page to them)."""
    out = []
    for t, by, label, _p, rs in m["rows"]:
        ds = [x.decision for res in rs for x in res.ranges]
        out.append(
            f"| {t:.0%} | {by} | {label} | {len(rs)} | {_counts(rs)} | {_span([d.change_pct for d in ds])} % "
            f"| {_span([d.detectable_pct for d in ds], '{:.1f}')} % |"
        )
    return out


def summary(m: dict) -> list[str]:
    """What the table says, in words (computed, so that it says what the table does)."""

    def row(t, by, start):
        return next(rs for tt, b, label, _, rs in m["rows"] if tt == t and b == by and label.startswith(start))

    def n(rs, v):
        return sum(r.verdict == v for r in rs)

    aa, host = row(0.03, "gpu", "A/A"), row(0.03, "host", "A/A")
    p3, p10 = row(0.03, "gpu", "planted +3 % against"), row(0.03, "gpu", "planted +10 % against")
    p3_1 = row(0.01, "gpu", "planted +3 % against")
    return [
        f"What it says: by GPU time, {n(aa, 'regression')} of {len(aa)} A/A gates raised an alarm "
        f"({n(row(0.01, 'gpu', 'A/A'), 'regression')} at a 1 % threshold); the planted +10 % was a regression "
        f"in {n(p10, 'regression')} of {len(p10)} gates. The planted +3 % sits on the default 3 % threshold: "
        f"{n(p3, 'regression')} regression, {n(p3, 'undecided')} undecided, {n(p3, 'pass')} pass, the undecided ones "
        f"asking for more calls (below); at a 1 % threshold it was a regression in "
        f"{n(p3_1, 'regression')} of {len(p3_1)}. By host time the same A/A pairs gave {n(host, 'regression')} "
        f"regressions and {n(host, 'improvement')} improvements of {len(host)}: the host time per call of this "
        "program moves between processes far more than between the calls of one, and the band sees only the "
        "latter (a `--by host` report says so in a note).",
    ]


def render(m: dict, cli: dict[str, float]) -> str:
    span = _span
    decisions = [[x.decision for res in rs for x in res.ranges] for *_, rs in m["rows"]]
    lines = [
        f"# The regression gate on {m['gpu']}: ten A/A repeats and planted +3 % / +10 %",
        "",
        "Written by `python benchmarks/gate_gpu.py --write` (protocol in its docstring) from the "
        "captures in `tests/data/gate/gate.tar.xz` (`rmsnorm_fwd-h100-repeats/`).",
        "",
        f"- GPU: {m['gpu']}, driver 580.159.04, default (boost) clocks, not locked; nsys 2025.3.1, "
        "torch 2.11.0+cu130, Triton 3.6.0, CUDA 13.0; captured 2026-12-05 "
        "(`benchmarks/gpu/programs.sh gate`; the versions are the session's versions.txt, the reports "
        "themselves carry only the GPU name).",
        "- Program: the lab Triton RMSNorm forward (`benchmarks/programs/gate_rmsnorm.py`, 16384 x 4096 "
        f"bf16, one row a program), {'/'.join(map(str, m['calls']))} calls a capture, each its own NVTX "
        f"range `{', '.join(m['paths'])}`, timeline only (`nsys profile -t cuda,nvtx`). "
        "A planted capture launches more rows with the same kernel: "
        + ", ".join(f"+{p} % -> {planted_pct(p):.2f} % more rows" for p in PLANTS)
        + ". Captured interleaved: aa-01, aa-02, 3pct-1, aa-03, aa-04, 10pct-1, aa-05, aa-06, 3pct-2, "
        "aa-07, aa-08, 10pct-2, aa-09, aa-10.",
        f"- {len(m['aa'])} A/A captures, " + ", ".join(f"{len(m['plants'][p])} at +{p} %" for p in PLANTS) + ".",
        "",
        "| threshold | by | comparison | gates | verdicts | change per gate | could tell (95 %, 80 % power) |",
        "|---|---|---|---:|---|---|---|",
    ]
    lines += table(m)
    und = [d.more_calls for ds in decisions for d in ds if d.verdict == "undecided" and d.more_calls]
    lines += [
        "",
        "Planted size against what the gate measured (GPU time, all planted gates at 3 %): "
        + "; ".join(
            f"+{p} % (rows +{planted_pct(p):.2f} %): "
            + span(
                [
                    x.decision.change_pct
                    for t, by, _, pp, rs in m["rows"]
                    if pp == p and t == 0.03 and by == "gpu"
                    for res in rs
                    for x in res.ranges
                ]
            )
            + " %"
            for p in PLANTS
        )
        + ". The time grows a little less than the rows, as it does where part of a launch (start, tail) "
        "does not grow with them.",
        "",
        *summary(m),
        "",
        (f"Undecided gates asked for {span(und, '{:,.0f}')} more calls a side." if und else "No gate was undecided.")
        + " A change that sits at the threshold asks for many (a slow-down of 3.0 % against a 3 % threshold).",
        "",
        "Per capture, the median GPU time per call (µs), its robust spread (1.4826 x MAD of log time, %) and "
        "the median host time per call (µs):",
        "",
        "| capture | GPU µs/call | spread % | host µs/call |",
        "|---|---:|---:|---:|",
    ]
    lines += [f"| {r} | {a:.2f} | {100 * s:.2f} | {h:.1f} |" for r, (a, s, h) in m["per_call"].items()]
    gs = m["gate_s"]
    lines += [
        "",
        f"Time: the decision itself (samples in hand, bootstrap of 2000 resamples) took "
        f"{1e3 * statistics.median(gs):.0f} ms a gate (median of {len(gs)}, {1e3 * max(gs):.0f} ms at most; "
        "this machine, 2 CPU cores, Python 3.11). The CLI on one pair, each step a process of its own: "
        + ", ".join(f"{k} {v:.1f} s" for k, v in cli.items())
        + f"; {sum(cli.values()):.1f} s in all.",
        "",
    ]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", nargs="?", type=Path,
                    help=f"where the reports are (default: {REPEATS}/ of tests/data/gate/gate.tar.xz)")
    ap.add_argument("--write", action="store_true", help=f"write {PAGE.relative_to(ROOT)}")
    args = ap.parse_args()
    from profkit.store.store import Store

    with tempfile.TemporaryDirectory() as tmp:
        folder = args.folder or unpack("gate", Path(tmp)) / REPEATS
        files = reports(folder)
        if not any(kind(r) == "aa" for r in files) or len(files) < 3:
            print(f"no A/A and planted captures under {folder}", file=sys.stderr)
            return 2
        db = str(Path(tmp) / "gate.db")
        load(db, files)
        with Store(db, readonly=True) as s:
            m = measure(s)
        text = render(m, cli_times(files, tmp))
    print(text)
    if args.write:
        PAGE.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
