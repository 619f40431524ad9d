"""What the best kernel of each family reaches on this GPU, by shape class: the measured rows of
profkit's attainable-efficiency table (profkit/model/attainable.py reads the JSON this writes).

    python3 attainable_sweep.py --out attainable.json [--quick]

Families and shapes (bf16 unless named):
  gemm       torch.matmul (cuBLAS/cuBLASLt) by shape class: large cubes, medium, K < 512, skinny
             (M <= 64, decode)
  attention  scaled_dot_product_attention per backend (cudnn, flash, efficient, math), forward
             and forward + backward, causal, S 128..8192, D 64 and 128, B x H sized to fill the GPU
  copy       a device-to-device copy (Tensor.copy_), 1 GiB
  elementwise  add of two tensors, GELU (1 GiB outputs)
  reduction  softmax, layer_norm and sum over rows of 4096..32768 columns

Each figure: the median of CUDA-event timings over repeats after warm-up (one kernel stream, no
host in the way); FLOPs and bytes from the shapes (attention: causal counts half of the S x S
work, the convention of FlashAttention's benchmarks); efficiency against the GPU's datasheet
peaks as profkit knows them (profkit.model.gpus), the roofs advise divides by.
"""

import argparse
import datetime
import json
import statistics
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

BACKENDS = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION,
            "efficient": SDPBackend.EFFICIENT_ATTENTION, "math": SDPBackend.MATH}


def timed(fn, reps=20, warm=3):
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        ts.append(s.elapsed_time(e) * 1e3)  # us
    return statistics.median(ts), min(ts), max(ts)


def gemm_rows(quick):
    shapes = [("large", 8192, 8192, 8192), ("large", 4096, 4096, 4096), ("medium", 2048, 2048, 2048),
              ("medium", 8192, 4096, 1024), ("medium", 1024, 1024, 1024), ("k_small", 8192, 8192, 256),
              ("k_small", 4096, 4096, 128), ("skinny", 64, 8192, 8192), ("skinny", 16, 8192, 8192),
              ("skinny", 1, 8192, 8192), ("skinny", 64, 4096, 4096), ("small", 512, 512, 512)]
    if quick:
        shapes = shapes[:2] + shapes[-3:]
    out = []
    for cls, m, n, k in shapes:
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
        med, lo, hi = timed(lambda: a @ b)
        out.append({"family": "gemm", "class": cls, "shape": f"M{m} N{n} K{k}", "dtype": "bf16",
                    "flops": 2.0 * m * n * k, "bytes": 2.0 * (m * k + k * n + m * n),
                    "us": med, "us_min": lo, "us_max": hi})
    return out


def attention_rows(quick):
    out = []
    seqs = [128, 512, 2048, 8192] if quick else [128, 256, 512, 1024, 2048, 4096, 8192]
    for d in (64, 128):
        for s in seqs:
            h = 16 if d == 128 else 12
            b = max(1, (16384 * 8) // (s * h)) if s <= 2048 else max(1, 65536 // s)  # ~fill the GPU
            shape = (b, h, s, d)
            q, k, v = (torch.randn(shape, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
            dout = torch.randn(shape, device="cuda", dtype=torch.bfloat16)
            fwd_flops = 4.0 * b * h * s * s * d / 2  # causal: half the S x S work
            for name, be in BACKENDS.items():
                if name == "math" and b * h * s * s * 4 > 8 * 2**30:
                    continue  # its S x S scores would not fit
                try:
                    with sdpa_kernel(be):
                        f = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True)  # noqa: E731
                        fmed, flo, fhi = timed(f, reps=10)

                        def fb():
                            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
                            o.backward(dout)
                            q.grad = k.grad = v.grad = None
                        bmed, blo, bhi = timed(fb, reps=10)
                except RuntimeError as e:  # a backend that does not take this shape
                    out.append({"family": "attention", "backend": name, "seq": s, "head_dim": d,
                                "error": str(e).splitlines()[0][:160]})
                    torch.cuda.empty_cache()
                    continue
                common = {"family": "attention", "backend": name, "class": f"S{s} D{d}", "seq": s,
                          "head_dim": d, "shape": f"B{b} H{h} S{s} D{d} causal", "dtype": "bf16"}
                out.append({**common, "pass": "fwd", "flops": fwd_flops, "us": fmed, "us_min": flo, "us_max": fhi})
                out.append({**common, "pass": "fwd+bwd", "flops": fwd_flops * 3.5, "us": bmed, "us_min": blo,
                            "us_max": bhi})  # bwd = 2.5 x fwd (FlashAttention's count)
            torch.cuda.empty_cache()
    return out


def memory_rows(quick):
    out = []
    n = 2**29  # 1 GiB of bf16
    x = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    y = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    z = torch.empty_like(x)
    for fam, cls, fn, nbytes in [
        ("copy", "d2d 1 GiB", lambda: z.copy_(x), 2 * 2.0 * n),
        ("elementwise", "add 1 GiB", lambda: torch.add(x, y, out=z), 3 * 2.0 * n),
        ("elementwise", "gelu 1 GiB", lambda: torch.nn.functional.gelu(x), 2 * 2.0 * n),
    ]:
        med, lo, hi = timed(fn)
        out.append({"family": fam, "class": cls, "shape": f"{n} bf16", "bytes": nbytes, "us": med,
                    "us_min": lo, "us_max": hi})
    cols = [4096, 32768] if quick else [1024, 4096, 8192, 32768, 131072]
    for c in cols:
        r = 2**28 // c  # 512 MiB of bf16 a tensor
        x = torch.randn(r, c, device="cuda", dtype=torch.bfloat16)
        w = torch.ones(c, device="cuda", dtype=torch.bfloat16)
        for op, fn, nbytes in [
            ("softmax", lambda: torch.softmax(x, dim=-1), 2 * 2.0 * r * c),
            ("layer_norm", lambda: F.layer_norm(x, (c,), w), 2 * 2.0 * r * c),
            ("sum", lambda: x.sum(dim=-1), 2.0 * r * c),
        ]:
            med, lo, hi = timed(fn)
            out.append({"family": "reduction", "class": f"{op} rows of {c}", "shape": f"{r}x{c} bf16",
                        "bytes": nbytes, "us": med, "us_min": lo, "us_max": hi})
        torch.cuda.empty_cache()
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--quick", action="store_true")
    a = p.parse_args()
    props = torch.cuda.get_device_properties(0)
    env = {"gpu": props.name, "sms": props.multi_processor_count, "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
           "torch": torch.__version__, "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(),
           "python": sys.version.split()[0]}
    rows = []
    for part in (memory_rows, gemm_rows, attention_rows):
        rows += part(a.quick)
        print(part.__name__, len(rows), flush=True)
    with open(a.out, "w") as f:
        json.dump({"env": env, "rows": rows}, f, indent=1)
    for r in rows:
        if "us" in r:
            rate = r.get("flops", 0) / r["us"] / 1e6 if r.get("flops") else r["bytes"] / r["us"] / 1e3
            unit = "TFLOP/s" if r.get("flops") else "GB/s"
            print(f"{r['family']:11} {r.get('backend', ''):9} {r.get('pass', ''):7} {r['shape']:28} {r['us']:10.1f} us {rate:9.1f} {unit}")


if __name__ == "__main__":
    main()
