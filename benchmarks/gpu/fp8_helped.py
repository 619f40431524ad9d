#!/usr/bin/env python3
"""Round 10 (issue 21 item 3): helper SMs for the one-wave shape (fp8_gemm_helped).

At qwen7b-down-m1024 v3's 112 tiles of 128x256 leave 20 of 132 SMs idle (H100 and H200). The
helped launch runs the tail of every tile's K on those SMs beside the tiles' own programs (which
run the head), joined by a programmatic dependent launch. This script: float64 check of each
launch first, then round-robin do_bench beside v3 and both _scaled_mm modes, GPU time by graph
replay, host time per call, and the registers / spills of every compiled kernel. Launches: the
registered variant (balanced head), heads of 120 / 126 / 135 k tiles, the helpers at 3 stages,
and the control without PDL (the grids one after the other).

    python3 benchmarks/gpu/fp8_helped.py [--rounds 5] [--out DIR] [--shapes a,b]
"""
import json
import os
import sys

from profkit.kernels import fp8_gemm as F

LAUNCHES = {  # name -> fp8_gemm_helped keyword arguments (run a: the first six)
    "helped": {},
    "helped_h120": {"main_k_tiles": 120},
    "helped_h126": {"main_k_tiles": 126},
    "helped_h135": {"main_k_tiles": 135},
    "helped_s3": {"help_config": (128, 128, 128, 8, 3, 8)},
    "helped_nopdl": {"pdl": False},
}
# run b (--set b): helpers with the main tile's shape (2 stages: the fp32 store's layout change
# beside the loop's buffers), or one warpgroup's 64x256; and each grid alone (the other's launch
# dropped: wrong output, timed only) to see whether the two grids slow each other down
LAUNCHES_B = {
    "helped": {},
    "helped_h135": {"main_k_tiles": 135},
    "help256s2_h128": {"help_config": (128, 256, 128, 8, 2, 8), "main_k_tiles": 128},
    "help256s2_h132": {"help_config": (128, 256, 128, 8, 2, 8), "main_k_tiles": 132},
    "help64x256_h128": {"help_config": (64, 256, 128, 4, 3, 8), "main_k_tiles": 128},
    "head_only_h128": {"main_k_tiles": 128, "_drop": "helper"},
    "head_only_h135": {"main_k_tiles": 135, "_drop": "helper"},
    "helpers_only_h128": {"main_k_tiles": 128, "_drop": "head"},
    "helpers256s2_only_h128": {"help_config": (128, 256, 128, 8, 2, 8), "main_k_tiles": 128, "_drop": "head"},
}


class _Drop:
    """Stands in for one of the helped launch's kernels: its launch is skipped."""

    def __getitem__(self, grid):
        return lambda *a, **k: None


def helped(aq, bq, sa, sb, out, kw):
    kw = dict(kw)
    drop = kw.pop("_drop", None)
    if not drop:
        return F.fp8_gemm_helped(aq, bq, sa, sb, out=out, **kw)
    name = "_fp8_gemm_pchunk" if drop == "helper" else "_fp8_gemm_head"
    keep = getattr(F, name)
    setattr(F, name, _Drop())
    try:
        return F.fp8_gemm_helped(aq, bq, sa, sb, out=out, **kw)
    finally:
        setattr(F, name, keep)


def dump_ir():
    res = []
    for name in ("_fp8_gemm_head", "_fp8_gemm_pchunk"):
        for cache in getattr(F, name).device_caches.values():
            kernels = cache[0] if isinstance(cache, tuple) else cache
            for k in getattr(kernels, "values", lambda: [])():
                ir = k.asm.get("ttgir", "")
                res.append(dict(kernel=name, n_regs=getattr(k, "n_regs", None), n_spills=getattr(k, "n_spills", None),
                                shared=getattr(k.metadata, "shared", None), wgmma=ir.count("warp_group_dot "),
                                tma_loads=ir.count("async_tma_copy_global_to_local")))
    return res


def main():
    import torch

    sys.path.insert(0, os.path.dirname(__file__))
    from fp8_launch import MODES, checked_launches, device_cli, measure

    launches = LAUNCHES_B if os.environ.get("HELPED_SET") == "b" else LAUNCHES
    args, w, shapes, hdr, bench, gbench = device_cli("fp8_gemm", 5, lambda p: p["M"] >= 1024)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    rows = []
    for shape, p in shapes.items():
        split = F.helped_split(p["M"], p["N"], p["K"], sms=sms)
        if split is None:
            print(f"{shape}: no idle SM at 128x256 ({sms} SMs), skipped", flush=True)
            continue
        print(shape, "split (tiles, helpers, head):", split, flush=True)
        state = w.setup(p, "fp8", "cuda")
        for mode, (v3, peer) in MODES.items():
            aq, bq, sa, sb = state[mode]
            fns, checks = checked_launches(
                w, state, shape, mode, v3, peer,
                {name: (lambda kw: lambda out: helped(aq, bq, sa, sb, out, kw))(kw) for name, kw in launches.items()},
                keep_failed={name for name, kw in launches.items() if "_drop" in kw})
            rows += measure(shape, mode, fns, checks, v3, peer, bench, gbench, args.rounds, hdr)
        del state
        torch.cuda.empty_cache()
    ir = dump_ir()
    for d in ir:
        print("compiled", d, flush=True)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, f"fp8_helped{os.environ.get('HELPED_SET', '')}.json"), "w") as f:
        json.dump(dict(header=hdr, rounds=args.rounds, rows=rows, ir=ir, launches=launches), f, indent=1)


if __name__ == "__main__":
    main()
