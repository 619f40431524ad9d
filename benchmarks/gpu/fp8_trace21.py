#!/usr/bin/env python3
"""Round 21 probe (issue 21 item 3): where a consumer warpgroup's cycles go in the CUDA fp8 GEMM,
read from clock64 stamps the kernel writes when given a trace buffer (fp8_gemm_cuda's `trace`):
its start, each tile's k loop start and end, each epilogue's end and its own end, per CTA and
consumer, at qwen7b-down-m1024 per-tensor, with loads and without (diagnostic=2), with the
epilogue from registers and through TMA. A k tile's four m64n112k32 take 224 tensor-pipe cycles a
warpgroup at the dense fp8 rate of an H100 or H200 SM (4,096 multiply-adds a cycle), 448 for the
CTA's two, so a tile's k loop (148 k tiles) is 66,304 pipe cycles at least.

    python3 benchmarks/gpu/fp8_trace21.py --out DIR [--group8]
"""
import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

from profkit.kernels import fp8_gemm_cuda as C
from profkit.kernels import get
from profkit.kernels.fp8_gemm import scaled_mm
from profkit.kernels.timing import header, stamp

PIPE_PER_KTILE = 448


def run(aq, bq, sa, sb, out, diag, reps=5, **kw):
    """The stamps of `reps` launches (after two unrecorded), each after a pause: rows of 16, one per
    CTA and consumer (fp8_gemm_cuda's docstring says which is which)."""
    tr = torch.zeros(32 * torch.cuda.get_device_properties(0).multi_processor_count, dtype=torch.int64, device="cuda")
    rows = []
    for i in range(reps + 2):
        torch.cuda.synchronize()
        time.sleep(0.05)
        tr.zero_()
        C.fp8_gemm_cuda(aq, bq, sa, sb, out, cluster=1, diagnostic=diag, trace=tr, **{"group_m": 2, **kw})
        torch.cuda.synchronize()
        if i >= 2:
            rows.append(tr.view(-1, 16).cpu().tolist())
    return rows


def summarize(rows, nk):
    ideal = nk * PIPE_PER_KTILE
    out = []
    for launch in rows:
        per = []
        for w, r in enumerate(launch):
            if r[15] == 0:
                continue
            tiles = int(r[14])
            loops = [r[2 + 3 * j] - r[1 + 3 * j] for j in range(min(tiles, 4))]
            epis = [r[3 + 3 * j] - r[2 + 3 * j] for j in range(min(tiles, 4))]
            gaps = [r[1 + 3 * j] - r[3 + 3 * (j - 1)] for j in range(1, min(tiles, 4))]
            per.append(dict(cta=w // 2, wg=w % 2, sm=int(r[13]), tiles=tiles, total=r[15] - r[0], pre=r[1] - r[0],
                            loops=loops, epis=epis, gaps=gaps, post=r[15] - r[3 + 3 * (min(tiles, 4) - 1)]))
        two = [p for p in per if p["tiles"] == 2]
        longest = max(per, key=lambda p: p["total"])
        loop_eff = [ideal / l for p in two for l in p["loops"]]
        out.append(dict(longest=longest, n=len(per), median_total=statistics.median(p["total"] for p in per),
                        loop_eff_median=statistics.median(loop_eff), loop_eff_min=min(loop_eff),
                        loop_eff_max=max(loop_eff),
                        pre_median=statistics.median(p["pre"] for p in per),
                        epi_median=statistics.median(e for p in per for e in p["epis"]),
                        gap_median=statistics.median(g for p in two for g in p["gaps"]) if two else None))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--group8", action="store_true", help="GROUP_M 8 with the TMA epilogue, plain and with kflip")
    args = ap.parse_args()
    w = get("fp8_gemm")
    state = w.setup(w.shapes["qwen7b-down-m1024"], "fp8", "cuda")
    aq, bq, sa, sb = state["tensor"]
    nk = (aq.shape[1] + 127) // 128
    out = torch.empty((aq.shape[0], bq.shape[0]), dtype=torch.bfloat16, device="cuda")
    meta = dict(stamp(header("cuda")), shape="qwen7b-down-m1024", mode="tensor", nk=nk, ideal_loop=nk * PIPE_PER_KTILE)
    C.fp8_gemm_cuda(aq, bq, sa, sb, out, cluster=1, group_m=2)
    print("check", w.check(state, "scaled_mm_tensor", out, "fp8"), flush=True)
    res = {}
    configs = [(0, {}), (2, {}), (0, dict(epilogue="tma")), (2, dict(epilogue="tma"))]
    if "--group8" in sys.argv:  # cuda_ws112_tma8's order, with and without kflip
        configs = [(0, dict(epilogue="tma", group_m=8)), (0, dict(epilogue="tma", group_m=8, kflip=True))]
    for diag, kw in configs:
        if kw:
            C.fp8_gemm_cuda(aq, bq, sa, sb, out, cluster=1, **{"group_m": 2, **kw})
            print(kw, "check", w.check(state, "scaled_mm_tensor", out, "fp8"), flush=True)
        s = summarize(run(aq, bq, sa, sb, out, diag, **kw), nk)
        res[f"diagnostic{diag}" + "".join(f"_{k}{v}" for k, v in kw.items())] = s
        for i, x in enumerate(s):
            L = x["longest"]
            print(f"diag {diag} {kw} launch {i}: longest CTA {L['cta']} wg {L['wg']} sm {L['sm']} total {L['total']} "
                  f"pre {L['pre']} loops {L['loops']} epis {L['epis']} gaps {L['gaps']} post {L['post']} | "
                  f"median total {x['median_total']:.0f}, loop efficiency (ideal/loop) median {x['loop_eff_median']:.3f} "
                  f"[{x['loop_eff_min']:.3f}-{x['loop_eff_max']:.3f}], pre {x['pre_median']:.0f}, epilogue "
                  f"{x['epi_median']:.0f}, gap {x['gap_median']}", flush=True)
    # cuBLAS's time at the same shape, events, for scale (after one untimed call)
    scaled_mm(aq, bq, sa, sb)
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(2)]
    ts = []
    for _ in range(5):
        torch.cuda.synchronize()
        time.sleep(0.05)
        ev[0].record()
        scaled_mm(aq, bq, sa, sb)
        ev[1].record()
        ev[1].synchronize()
        ts.append(ev[0].elapsed_time(ev[1]) * 1e3)
    meta["scaled_mm_us"] = ts
    print("scaled_mm us", [round(t, 1) for t in ts])
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "fp8_trace21.json").write_text(json.dumps(dict(meta=meta, **res), indent=1))


if __name__ == "__main__":
    main()
