#!/usr/bin/env python3
"""The SGEMM ladder as one picture: a roofline of the eight CUDA C++ steps (naive -> warp tiling)
and cuBLAS at 4096^3, each step a point (its NVTX range sgemm/<step>/4096, counters from
Nsight Compute), joined in ladder order, coloured by its `profkit classify` label.

    python3 benchmarks/sgemm_ladder_roofline.py [--profile profiles/sgemm-ladder-4096]
                                                [-o benchmarks/results/sgemm_ladder_roofline.html]

Reads the committed capture (nsys + ncu roofline metric set, benchmarks/gpu/cuda_lab.sh), loads
it into a temporary database, classifies it, and draws it with profkit.analyses.roofline in chain mode.
Prints each step's label and the arrow count.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHAIN_STEPS = ("naive", "coalesced", "smem", "blocktile_1d", "blocktile_2d", "vectorized", "tuned", "warptile",
               "cublas")


def chain_paths(shape: str = "4096") -> list[str]:
    return [f"sgemm/{s}/{shape}" for s in CHAIN_STEPS]


def draw(profile: Path, out: Path, db: str | None = None) -> dict:
    from profkit.analyses.classify import classify
    from profkit.outputs import roofline_plot as roofline
    from profkit.store.profiles import load_profiles
    from profkit.store.store import Store

    run = profile.name
    with tempfile.TemporaryDirectory() as tmp:
        db = db or str(Path(tmp) / "ladder.db")
        # load_profiles takes a folder of run folders: point it at a folder holding only this one
        root = Path(tmp) / "profiles"
        root.mkdir()
        (root / run).symlink_to(profile.resolve(), target_is_directory=True)
        load_profiles(root, db)
        store = Store(db)
        try:
            classify(store, run)
            per_step = {p: sorted({r["label"] for r in store.query(
                "SELECT c.label FROM classifications c JOIN kernels k USING (kernel_id) "
                "WHERE k.run = ? AND k.nvtx_path = ?", (run, p))}) for p in chain_paths()}
            fig = roofline.build(store, run=run, chain=chain_paths())
            roofline.write_html(fig, out)
        finally:
            store.close()
    return {"html": str(out), "labels": per_step, "arrows": fig.layout.meta["arrows"] if fig.layout.meta else None}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", type=Path, default=ROOT / "profiles" / "sgemm-ladder-4096")
    ap.add_argument("-o", "--output", type=Path, default=ROOT / "benchmarks" / "results" / "sgemm_ladder_roofline.html")
    a = ap.parse_args(argv)
    got = draw(a.profile, a.output)
    for path, labels in got["labels"].items():
        print(f"{path}: {', '.join(labels) or '-'}")
    print(f"{got['arrows']} arrows -> {got['html']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
