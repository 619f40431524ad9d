"""fp8 GEMM with accurate accumulation vs torch._scaled_mm (issue 21 item 3), one process.

python3 bench_fp8.py [--setN] [--both] [--rounds R] [--only NAME,...] [--shapes a,b]
  -> table on stdout, JSON to $OUT/fp8_bench.json (or ./fp8_bench.json)
--setN picks a config list (CONFIGS .. CONFIGS7 below; the final comparison was --set7 --rounds 7);
--rounds R times every variant and both _scaled_mm scale modes round-robin R times (do_bench
median each) and reports the median of the R, so clock drift hits all of them alike.
Needs a Hopper GPU (TMA descriptors, fp8 wgmma); torch + triton only, plus the lab's v1 from
kernels/fp8_gemm.py for the same-run comparison.
Error: max|out-ref|/rms(ref) and ||out-ref||/||ref|| against the dequantized operands in float64
(the lab's 'gemm' policy for fp8: rel_fro <= 1e-2, max_rel <= 5e-2).
"""
import datetime
import json
import math
import os
import subprocess
import sys
import time

import torch
import triton
from triton.tools.tensor_descriptor import TensorDescriptor

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, _HERE)
for _up in (os.path.join(_HERE, "..", "..", ".."), os.path.join(_HERE, "..")):  # repo root (kernels.fp8_gemm)
    if os.path.isdir(os.path.join(_up, "kernels")):
        sys.path.insert(0, os.path.abspath(_up))
        break
import fp8k  # noqa: E402

TOL_FRO, TOL_MAX = 1e-2, 5e-2
FP8_MAX = 448.0
SHAPES = {  # kernels/fp8_gemm.py SHAPES with M >= 1024
    "llama8b-gateup-m1024": (1024, 28672, 4096),
    "qwen7b-down-m1024": (1024, 3584, 18944),
    "llama8b-qkv-m4096": (4096, 6144, 4096),
    "llama8b-down-m4096": (4096, 4096, 14336),
    "m8192-n8192-k8192": (8192, 8192, 8192),
}


def cfg(kind, bm, bn, mode, p, w, s, occ=1, g=8, bk=128, sub=False, early=False):
    return dict(kind=kind, BM=bm, BN=bn, BK=bk, MODE=mode, P=p, warps=w, stages=s, occ=occ, G=g, sub=sub,
                early=early)


def name_of(c):
    m = {0: "fast", 1: "tlimp", 2: "ifP", 3: "2acc", 4: "chunk", 5: "whereP", 6: "ifmul", 7: "ifsub", 8: "fused", 9: "fusedr"}[c["MODE"]]
    p = f"{m}{c['P']}" if c["MODE"] >= 2 else m
    return (f"{c['kind']}:{p}:{c['BM']}x{c['BN']}x{c['BK']}:w{c['warps']}s{c['stages']}o{c['occ']}g{c['G']}"
            + ("e2" if c.get("sub") else "") + ("se" if c.get("early") else ""))


CONFIGS2 = []
for P in (4, 8, 16):
    CONFIGS2 += [cfg("pch", 128, 128, 8, P, 8, 4), cfg("pch", 128, 128, 8, P, 8, 5), cfg("pch", 128, 256, 8, P, 8, 3),
                 cfg("pch", 64, 128, 8, P, 4, 4, occ=2)]
CONFIGS2 += [cfg("pch", 128, 128, 8, 8, 8, 4, g=16), cfg("tma", 128, 128, 6, 8, 8, 5), cfg("pers", 128, 256, 6, 8, 8, 3),
             cfg("pers", 128, 128, 6, 8, 8, 4), cfg("pers", 128, 256, 0, 1, 8, 3)]

CONFIGS3 = [cfg("pch", 128, 256, 9, 16, 8, 3), cfg("pch", 128, 256, 9, 16, 8, 4, sub=True),
            cfg("pch", 128, 256, 9, 16, 8, 3, sub=True), cfg("pch", 128, 256, 9, 16, 8, 3, g=4),
            cfg("pch", 128, 256, 9, 16, 8, 3, g=16), cfg("pch", 128, 256, 9, 8, 8, 3),
            cfg("pch", 128, 256, 9, 8, 8, 4, sub=True), cfg("pch", 128, 256, 9, 32, 8, 3),
            cfg("pch", 128, 256, 8, 16, 8, 3), cfg("pers", 128, 256, 0, 1, 8, 3)]

CONFIGS4 = [cfg("pch", 128, 256, 9, 16, 8, 3), cfg("pch", 128, 256, 9, 16, 8, 3, early=True),
            cfg("pch", 128, 256, 9, 16, 8, 3, g=16, early=True), cfg("pch", 128, 256, 9, 32, 8, 3, early=True),
            cfg("pch", 128, 256, 9, 24, 8, 3, early=True), cfg("pers", 128, 256, 0, 1, 8, 3)]

CONFIGS5 = [cfg("pch", 128, 256, 9, 16, 8, 3, early=True), cfg("pch", 128, 256, 9, 32, 8, 5, bk=64, early=True),
            cfg("pch", 128, 256, 9, 32, 8, 6, bk=64, early=True), cfg("pch", 128, 256, 9, 32, 8, 4, bk=64, early=True),
            cfg("pch", 128, 256, 9, 16, 8, 3, early=True, g=4), cfg("pch", 128, 256, 9, 1024, 8, 3, early=True),
            cfg("pers", 128, 256, 0, 1, 8, 3)]

CONFIGS6 = [cfg("pch", 128, 256, 9, 16, 8, 3, early=True), cfg("pch", 128, 256, 9, 32, 8, 3, early=True),
            cfg("pch", 64, 256, 9, 16, 4, 2, occ=2, sub=True), cfg("pch", 64, 256, 9, 16, 4, 2, occ=2, early=True),
            cfg("pers", 128, 256, 0, 1, 8, 3)]

CONFIGS7 = [cfg("pch", 128, 256, 9, 8, 8, 3, early=True), cfg("pch", 128, 256, 9, 16, 8, 3, early=True),
            cfg("pch", 128, 256, 9, 32, 8, 3, early=True), cfg("pers", 128, 256, 0, 1, 8, 3)]

CONFIGS = []
for P in (2, 4, 8):
    CONFIGS += [cfg("pch", 128, 128, 4, P, 8, 4), cfg("pch", 128, 128, 4, P, 8, 5), cfg("pch", 128, 256, 4, P, 8, 3),
                cfg("pch", 64, 128, 4, P, 4, 4, occ=2), cfg("pch", 64, 256, 4, P, 4, 3, occ=1),
                cfg("tma", 128, 128, 4, P, 8, 5), cfg("tma", 128, 256, 4, P, 8, 3), cfg("tma", 64, 128, 4, P, 4, 4)]
CONFIGS += [cfg("pch", 128, 128, 4, 16, 8, 4), cfg("pch", 128, 128, 4, 32, 8, 4)]  # error trend only
CONFIGS += [cfg("pch", 128, 128, 0, 1, 8, 4), cfg("pch", 128, 256, 0, 1, 8, 3), cfg("pers", 128, 256, 0, 1, 8, 3),
            cfg("pch", 64, 128, 0, 1, 4, 4, occ=2)]
CONFIGS += [cfg("pers", 128, 128, 1, 1, 8, 4), cfg("tma", 128, 128, 1, 1, 8, 5), cfg("tma", 64, 128, 1, 1, 4, 4)]
CONFIGS += [cfg("tma", 128, 128, 3, 1, 8, 3), cfg("tma", 128, 128, 3, 2, 8, 3)]


def quantize(x, per_row):
    xf = x.float()
    amax = xf.abs().amax(dim=1) if per_row else xf.abs().amax()
    scale = (amax / FP8_MAX).clamp(min=1e-12)
    q = (xf / (scale[:, None] if per_row else scale)).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    return q, scale.to(torch.float32)


def deq(q, s):
    s = s.double()
    return q.double() * (s[:, None] if s.ndim == 1 else s)


def errs(out, ref):
    o = out.double()
    if not torch.isfinite(o).all():
        return float("inf"), float("inf")
    d = o - ref
    fro = (d.norm() / ref.norm()).item()
    rms = ref.norm().item() / math.sqrt(ref.numel())
    return fro, (d.abs().max().item() / rms)


NSM = None


def launch_fn(c, a, b, sa, sb, out, row):
    M, K = a.shape
    N = b.shape[0]
    BM, BN, BK = c["BM"], c["BN"], c["BK"]
    ad = TensorDescriptor.from_tensor(a, [BM, BK])
    bd = TensorDescriptor.from_tensor(b, [BN, BK])
    cd = TensorDescriptor.from_tensor(out, [BM, BN // 2] if c.get("sub") else [BM, BN])
    tiles = triton.cdiv(M, BM) * triton.cdiv(N, BN)
    common = dict(ROW=row, BM=BM, BN=BN, BK=BK, GROUP_M=c["G"], MODE=c["MODE"], P=c["P"],
                  num_warps=c["warps"], num_stages=c["stages"])
    if c["kind"] == "tma":
        k = fp8k.fp8_tma
        grid = (tiles,)
        extra = {}
    else:
        k = fp8k.fp8_tma_pchunk if c["kind"] == "pch" else fp8k.fp8_tma_persistent
        progs = min(NSM * c["occ"], tiles)
        grid = (progs,)
        extra = dict(NUM_SMS=progs, FLATTEN=True, WS=False)
        if c.get("sub"):
            extra["EPI_SUB"] = True
        if c.get("early"):
            extra["SCALE_EARLY"] = True

    def run():
        k[grid](ad, bd, cd, sa, sb, M, N, K, **common, **extra)
        return out

    return run


def scaled_mm_fn(a, b, sa, sb, row):
    if row:
        sa2, sb2 = sa.reshape(-1, 1), sb.reshape(1, -1)
    else:
        sa2, sb2 = sa.reshape(()), sb.reshape(())
    bt = b.t()
    return lambda: torch._scaled_mm(a, bt, scale_a=sa2, scale_b=sb2, out_dtype=torch.bfloat16, use_fast_accum=False)


def bench(fn):
    from triton.testing import do_bench
    return float(do_bench(fn, warmup=25, rep=100, return_mode="median"))


def main():
    global NSM
    args = sys.argv[1:]
    only = None
    if "--only" in args:
        only = set(args[args.index("--only") + 1].split(","))
    shapes = SHAPES if "--quick" not in args else {k: SHAPES[k] for k in ("llama8b-qkv-m4096", "m8192-n8192-k8192")}
    if "--shapes" in args:
        shapes = {k: SHAPES[k] for k in args[args.index("--shapes") + 1].split(",")}
    pool = (CONFIGS2 if "--set2" in args else CONFIGS3 if "--set3" in args else CONFIGS4 if "--set4" in args
            else CONFIGS5 if "--set5" in args
            else CONFIGS6 if "--set6" in args else CONFIGS7 if "--set7" in args else CONFIGS)
    configs = [c for c in pool if only is None or name_of(c) in only]
    dev = torch.device("cuda")
    NSM = torch.cuda.get_device_properties(dev).multi_processor_count
    try:
        drv = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True).stdout.strip()
    except Exception:
        drv = "?"
    hdr = dict(gpu=torch.cuda.get_device_name(), driver=drv, torch=torch.__version__, triton=triton.__version__,
               date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), sms=NSM)
    print(json.dumps(hdr), flush=True)
    try:
        from kernels import fp8_gemm as lab
    except Exception as e:
        print("lab import failed", e)
        lab = None
    rows = []
    outdir = os.environ.get("OUT", ".")
    t_start = time.time()
    for sname, (M, N, K) in shapes.items():
        torch.manual_seed(hash(sname) % 1000)
        x = torch.randn(M, K, device=dev, dtype=torch.bfloat16)
        w = torch.randn(N, K, device=dev, dtype=torch.bfloat16) * 0.02
        data = {}
        for mode, per_row in (("row", True), ("tensor", False)):
            aq, sa = quantize(x, per_row)
            bq, sb = quantize(w, per_row)
            ref = deq(aq, sa) @ deq(bq, sb).T
            data[mode] = (aq, bq, sa, sb, ref)
        base = {}
        for mode in ("row", "tensor"):
            aq, bq, sa, sb, ref = data[mode]
            fn = scaled_mm_fn(aq, bq, sa, sb, mode == "row")
            fro, mx = errs(fn(), ref)
            ms = bench(fn)
            base[mode] = ms
            rows.append(dict(shape=sname, variant=f"scaled_mm_{mode}", scale=mode, ms=ms, fro=fro, max_rel=mx, pct=100.0))
            print(f"{sname} scaled_mm {mode}: {ms:.4f} ms fro {fro:.2e} max {mx:.2e}", flush=True)
            if lab is not None:
                try:
                    out = torch.empty(M, N, device=dev, dtype=torch.bfloat16)
                    lf = lambda: lab.fp8_gemm_v1(aq, bq, sa, sb, out)
                    out.fill_(float("nan"))
                    fro, mx = errs(lf(), ref)
                    ms = bench(lf)
                    rows.append(dict(shape=sname, variant="lab_v1", scale=mode, ms=ms, fro=fro, max_rel=mx,
                                     pct=100 * base[mode] / ms))
                    print(f"{sname} lab v1 {mode}: {ms:.4f} ms ({100 * base[mode] / ms:.0f} %) max {mx:.2e}", flush=True)
                except Exception as e:
                    print("lab v1 failed", e)
        if "--rounds" in args:
            R = int(args[args.index("--rounds") + 1])
            fns = {}
            for mode in ("row", "tensor"):
                aq, bq, sa, sb, ref = data[mode]
                fns[("scaled_mm", mode)] = scaled_mm_fn(aq, bq, sa, sb, mode == "row")
                if lab is not None:
                    lout = torch.empty(M, N, device=dev, dtype=torch.bfloat16)
                    fns[("lab_v1_rot", mode)] = (lambda aq, bq, sa, sb, lout: lambda: lab.fp8_gemm_v1(aq, bq, sa, sb, lout))(
                        aq, bq, sa, sb, lout)
                for c in configs:
                    out = torch.empty(M, N, device=dev, dtype=torch.bfloat16)
                    fn = launch_fn(c, aq, bq, sa, sb, out, mode == "row")
                    out.fill_(float("nan"))
                    fn()
                    torch.cuda.synchronize()
                    fro, mx = errs(out, ref)
                    fns[(name_of(c), mode)] = fn
                    rows.append(dict(shape=sname, variant=name_of(c), scale=mode, rec="err", fro=fro, max_rel=mx,
                                     ok=bool(fro <= TOL_FRO and mx <= TOL_MAX), **c))
            times = {k: [] for k in fns}
            from triton.testing import do_bench
            for r in range(R):
                for k, fn in fns.items():
                    times[k].append(float(do_bench(fn, warmup=10, rep=60, return_mode="median")))
            for (nm, mode), ts in times.items():
                med = sorted(ts)[len(ts) // 2]
                bmed = sorted(times[("scaled_mm", mode)])[R // 2]
                errrow = [r for r in rows if r.get("rec") == "err" and r["shape"] == sname and r["variant"] == nm
                          and r["scale"] == mode]
                e = errrow[0] if errrow else {}
                rows.append(dict(shape=sname, variant=nm if nm != "scaled_mm" else f"scaled_mm_{mode}", scale=mode,
                                 ms=med, ms_all=ts, pct=100 * bmed / med, fro=e.get("fro", float("nan")),
                                 max_rel=e.get("max_rel", float("nan")), ok=e.get("ok", True)))
                print(f"{sname} {nm} {mode}: median {med:.4f} ms [{min(ts):.4f}-{max(ts):.4f}] "
                      f"{100 * bmed / med:.1f} % max {e.get('max_rel', float('nan')):.2e}", flush=True)
            configs_run = []
        else:
            configs_run = configs
        for c in configs_run:
            for mode in (("row", "tensor") if "--both" in args else ("row",)):
                aq, bq, sa, sb, ref = data[mode]
                out = torch.empty(M, N, device=dev, dtype=torch.bfloat16)
                nm = name_of(c)
                r = dict(shape=sname, variant=nm, scale=mode, **c)
                try:
                    fn = launch_fn(c, aq, bq, sa, sb, out, mode == "row")
                    out.fill_(float("nan"))
                    torch.cuda.synchronize()
                    fn()
                    torch.cuda.synchronize()
                    fro, mx = errs(out, ref)
                    ms = bench(fn)
                    r.update(ms=ms, fro=fro, max_rel=mx, pct=100 * base[mode] / ms,
                             ok=bool(fro <= TOL_FRO and mx <= TOL_MAX))
                    print(f"{sname} {nm} {mode}: {ms:.4f} ms {r['pct']:.1f} % fro {fro:.2e} max {mx:.2e}"
                          f" {'ok' if r['ok'] else 'FAIL'}", flush=True)
                except Exception as e:
                    msg = f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
                    r.update(error=msg)
                    print(f"{sname} {nm} {mode}: ERROR {msg}", flush=True)
                rows.append(r)
        del data, x, w
        torch.cuda.empty_cache()
        with open(os.path.join(outdir, "fp8_bench.json"), "w") as f:
            json.dump(dict(header=hdr, rows=rows), f, indent=1)
    print(f"total {time.time() - t_start:.0f} s")
    # summary: best accurate (P <= 8, ok) config per shape, and each variant's pct
    print("\n== summary (per-row unless noted) ==")
    print(json.dumps(hdr))
    for sname in shapes:
        rs = [r for r in rows if r["shape"] == sname and "ms" in r and r.get("rec") != "err"]
        print(f"-- {sname}")
        for r in sorted(rs, key=lambda r: r["ms"]):
            print(f"   {r['variant']:42s} {r['scale']:6s} {r['ms']:.4f} ms {r['pct']:6.1f} %  fro {r['fro']:.1e} max {r['max_rel']:.2e}"
                  f" {'' if r.get('ok', True) else 'FAIL'}")


if __name__ == "__main__":
    main()
