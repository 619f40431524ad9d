#!/usr/bin/env python3
"""Round 22 probe (issue 21 item 1): where the host time of a backward call goes, for the rows the
summary calls host-bound (rmsnorm_bwd and swiglu_bwd at 4096 tokens through autograd). For each
variant: the host time a call (200 calls queued without a sync, the wall time over the calls) and
the GPU time a call (CUDA events around the same loop after a sync, so the larger of the two
bounds it), then cProfile's top functions over 300 calls of the lab's autograd and direct paths,
and the bare cost of one Triton launch of the lab's backward kernel.

    python3 benchmarks/gpu/host22.py --out DIR
"""
import argparse
import cProfile
import io
import json
import pstats
import time
from pathlib import Path

import torch

from profkit.kernels import get
from profkit.kernels.timing import header, stamp


def host_and_gpu(call, s, n=200):
    for _ in range(5):
        call(s)
    torch.cuda.synchronize()
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(2)]
    ev[0].record()
    t0 = time.perf_counter()
    for _ in range(n):
        call(s)
    t1 = time.perf_counter()
    ev[1].record()
    torch.cuda.synchronize()
    return (t1 - t0) / n * 1e6, ev[0].elapsed_time(ev[1]) / n * 1e3


def profile(call, s, n=300, top=18):
    for _ in range(5):
        call(s)
    torch.cuda.synchronize()
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(n):
        call(s)
    pr.disable()
    torch.cuda.synchronize()
    buf = io.StringIO()
    pstats.Stats(pr, stream=buf).sort_stats("tottime").print_stats(top)
    return buf.getvalue()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    meta = stamp(header("cuda"))
    print(meta, flush=True)
    rows = []
    for op, shapes in (("rmsnorm_bwd", ("llama8b-t4096", "qwen7b-t4096")), ("swiglu_bwd", ("llama8b-t4096",))):
        w = get(op)
        for shape in shapes:
            s = w.setup(w.shapes[shape], "bf16", "cuda")
            for v in ("triton", "triton_direct", "compile", "compile_direct", "liger"):
                if v not in w.variants:
                    continue
                call = w.variants[v]
                host, gpu = host_and_gpu(call, s)
                rows.append(dict(op=op, shape=shape, variant=v, host_us=host, queued_us=gpu))
                print(f"{op:12} {shape:14} {v:15} host {host:7.1f} us a call | queued, events {gpu:7.1f} us a call",
                      flush=True)
            if shape == shapes[0]:
                for v in ("triton", "triton_direct"):
                    text = profile(w.variants[v], s)
                    (out / f"host22_profile_{op}_{v}.txt").write_text(text)
                    print(f"== cProfile {op} {v}\n" + "\n".join(text.splitlines()[:40]), flush=True)
    (out / "host22.json").write_text(json.dumps(dict(meta=meta, rows=rows), indent=1))


if __name__ == "__main__":
    main()
