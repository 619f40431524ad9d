#!/usr/bin/env python3
"""Was the advice right? For every before/after pair shipped in profiles/, the gain `profkit
advise` predicted for the BEFORE side against the gain `profkit compare` measured.

    python3 benchmarks/advise_calibration.py [--profiles profiles] [--out benchmarks/results] [--programs-only]

Loads profiles/ into a temporary database, labels every run, and writes advise.md and
advise.json; the ordinary programs' realised changes (tests/data/program-pairs, one packed
file unpacked to a temporary folder, and the CUDA-graph pair in profiles/) go to advise_programs.md and advise_programs.json (method:
profkit/analyses/calibration.py and docs/advise.md). CPU only: the pairs are shipped captures.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from datetime import date
from pathlib import Path

from profkit.analyses.calibration import OFF_BY, PROGRAM_OFF_BY, ProgramPair, calibrate, calibrate_program
from profkit.analyses.classify import classify
from profkit.model import peaks
from profkit.store.profiles import load_profiles
from profkit.store.store import Store

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from profdata import unpack  # noqa: E402 (the packed capture sets of tests/data, as the tests unpack them)

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


# ordinary programs (issue 50 item 3): one realised change each, captured with `profkit capture` on
# an H100 (tests/data/program-pairs, versions.txt in its archive; the CUDA-graph pair ships in profiles/)
PROGRAMS = [
    ProgramPair(
        "llama-decode-eager", "llama-decode-cudagraphs", "reduce-overhead",
        "CUDA graphs: torch.compile(mode=\"reduce-overhead\") on the Llama decode step (8 layers, d 1024, bf16)",
        "step",
    ),
    ProgramPair(
        "pair-sdpa-before-math", "pair-sdpa-after-cudnn", "backend",
        "SDPA backend math -> cuDNN (B8 H12 S512 D64 causal bf16, fwd+bwd)", "gpu",
    ),
    ProgramPair(
        "pair-sdpa2-before-math", "pair-sdpa2-after-default", "backend",
        "SDPA backend math -> the default (cuDNN) at another shape (B4 H16 S1024 D128 causal bf16, fwd+bwd)", "gpu",
    ),
    ProgramPair(
        "pair-compile-before-eager", "pair-compile-after-compiled", "compile",
        "torch.compile of an eager MLP block (LayerNorm, linear + GELU, linear, residual; 8192 x 1024 bf16)", "gpu",
    ),
    ProgramPair(
        "pair-channels-last-before", "pair-channels-last-after", "layout",
        "channels_last on a ResNet-18 training step (batch 64, bf16 autocast)", "gpu",
    ),
    ProgramPair(
        "pair-batch-before-16", "pair-batch-after-128", "batch",
        "ResNet-18 training, batch 16 -> 128 (throughput: window per sample)", "sample", batch=(16, 128),
    ),
    ProgramPair(
        "pair-sync-before-item", "pair-sync-after-end", "sync",
        "ResNet-18 training (batch 32): loss.item() every step -> once at the end", "step",
    ),
]


def run_programs(profiles: Path, data: Path | None = None) -> dict:
    """The program pairs' table (the test recomputes it from the stored pairs); `data`: the
    unpacked program-pairs folder (by default unpacked here, for the run)."""
    with tempfile.TemporaryDirectory() as d:
        data = data or unpack("program-pairs", Path(d))
        root = Path(d) / "pairs"
        root.mkdir()
        for folder in [p for p in data.iterdir() if p.is_dir()] + [profiles / "llama-decode-eager",
                                                                     profiles / "llama-decode-cudagraphs"]:
            (root / folder.name).symlink_to(folder.resolve())
        db = str(Path(d) / "programs.db")
        load_profiles(root, db)
        with Store(db) as s:
            for r in s.runs():
                classify(s, r)
            rows = [calibrate_program(s, p).row() for p in PROGRAMS]
        versions = (data / "versions.txt").read_text().strip().splitlines()
    return {"pairs": rows, "within": sum(r["within_35pct"] for r in rows), "total": len(rows),
            "off_by": PROGRAM_OFF_BY, "versions": versions}


def program_markdown(res: dict) -> str:
    v = res["versions"]
    lines = ["## Ordinary programs: one realised change each", "",
             f"Captured with `profkit capture` on an {v[1].split(',')[0]} (driver {v[1].split(',')[2].strip()}; "
             f"{v[-1]}; nsys/ncu 2025.3.1; {v[0][:10]}; the CUDA-graph pair: profiles/llama-decode-*, same GPU). "
             "Predicted: `profkit advise` on the BEFORE's steady state (its steps; every thread's kernels), the "
             "item(s) the change addresses; realised: the steady-state window per step (`step`), kernel time per "
             "step (`gpu`: the kernels' own change, where the host's step varies from run to run), or window per "
             f"sample (`sample`). ratio = predicted / realised; **{res['within']} of {res['total']}** within "
             f"±{100 * res['off_by']:.0f} %.", "",
             "| change | measure | before -> after (ms/step; GPU ms/step) | predicted | realised | ratio "
             "| within 35 % | basis / statement |", "|---|---|---|---|---|---|---|---|"]
    for r in res["pairs"]:
        pred = "-" if r["predicted"] is None else f"{r['predicted']:.2f}x"
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.2f}"
        note = r["basis"] + (f" **{r['statement']}**" if r["statement"] else "")
        lines.append(
            f"| {r['change']} (`{r['pair']}`) | {r['measure']} | {r['step_before_ms']:.3f} -> {r['step_after_ms']:.3f}; "
            f"{r['gpu_before_ms']:.3f} -> {r['gpu_after_ms']:.3f} | {pred} | {r['realised']:.2f}x | {ratio} | "
            f"{'yes' if r['within_35pct'] else 'no'} | {note.replace('|', '/')} |")
    return "\n".join(lines) + "\n"


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
             "gain `profkit compare` measured (H100 and H200 captures in profiles/; method: docs/advise.md). "
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
    ap.add_argument("--programs-only", action="store_true", help="only the program pairs (advise_programs.*)")
    a = ap.parse_args()
    if not a.programs_only:
        res = run(a.profiles)
        (a.out / "advise.json").write_text(json.dumps(res, indent=2, default=str) + "\n")
        (a.out / "advise.md").write_text(markdown(res))
        print(markdown(res))
    prog = run_programs(a.profiles)
    (a.out / "advise_programs.json").write_text(json.dumps(prog, indent=2, default=str) + "\n")
    (a.out / "advise_programs.md").write_text("# Advise calibration on ordinary programs\n\n" + program_markdown(prog))
    print(program_markdown(prog))
    sys.exit(0)
