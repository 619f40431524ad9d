#!/usr/bin/env python3
"""Round 23 (issue 21 item 1): the host-bound rows with the short launch path (kernels/_launch.py)
off and on, in one process. For each row: the host time a call (200 calls queued without a sync,
the wall time over the calls) and the GPU time a call (CUDA events around the same loop), off /
on / off / on (the drift of the host shows as the spread between the two of a side); then that the
lab's outputs are bit-equal with the path on and off, that it was taken (FastKernel.hits), and that
a CUDA graph captured through it replays to the same outputs.

    python3 benchmarks/gpu/host23.py --out DIR [--rows op:shape,...] [--switch fast|plans] [--pieces]

--switch plans (round 24): off / on toggles only the launch plans (_launch.PLANS), the short path
staying on; --pieces: the q/k RMSNorm + RoPE call at 4096 tokens taken apart (its outputs' two
allocations, the plan's launch alone, the whole call), to say where a call's host time goes.
"""
import argparse
import cProfile
import io
import json
import pstats
import statistics
from pathlib import Path

import torch

from host22 import host_and_gpu  # round 22's measure: 200 calls queued, wall time and CUDA events
from profkit.kernels import _launch, get
from profkit.kernels.timing import header, stamp

ROWS = ["rmsnorm_bwd:llama8b-t4096", "rmsnorm_bwd:qwen7b-t4096", "rmsnorm:llama8b-t1", "rmsnorm:llama8b-t4096",
        "rope:llama8b-t1", "rmsnorm_rope:qwen3-8b-t1", "rmsnorm_rope:qwen3-8b-t4096", "add_rmsnorm:llama8b-t1",
        "add_rmsnorm:llama8b-t4096", "swiglu:llama8b-t1", "swiglu_bwd:llama8b-t4096"]
PEERS = ("compile", "compile_direct", "liger")


def flat(out):
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in flat(o)]
    return []


def same(a, b):
    fa, fb = flat(a), flat(b)
    return len(fa) == len(fb) and len(fa) > 0 and all(torch.equal(x, y) for x, y in zip(fa, fb))


def hits():
    return sum(k.hits for k in _launch._FAST.values())


def toggle(switch: str, on: bool) -> None:
    if switch == "plans":
        _launch.ENABLED, _launch.PLANS = True, on
    else:
        _launch.ENABLED = on


def pieces_rmsnorm_rope(out, n=200, reps=5):
    """Host us a call of: the whole q/k RMSNorm + RoPE call (qwen3-8b-t4096, plan on), its two
    output allocations alone, its plan's launch alone into kept outputs, compile's call; min and
    median of `reps` loops of `n` calls queued without a sync (the GPU keeps up: at 4096 tokens a
    kernel takes about half a call's host time)."""
    import time

    from profkit.kernels import rmsnorm_rope as rr

    w = get("rmsnorm_rope")
    s = w.setup(w.shapes["qwen3-8b-t4096"], "bf16", "cuda")
    call = w.variants["triton"]
    qo, ko = call(s)
    call(s)
    plan = next(iter(rr._PLANS.d.values()))
    ts = (s["q"], s["k"], qo, ko, s["qw"], s["kw"], s["cos"], s["sin"], s["pos"])
    q, k = s["q"], s["k"]
    fns = {"call": lambda: call(s),
           "alloc2": lambda: (torch.empty(q.shape, dtype=q.dtype, device=q.device),
                              torch.empty(k.shape, dtype=k.dtype, device=k.device)),
           "plan_launch": lambda: plan.launch(ts),
           "compile": lambda: w.variants["compile"](s)}
    res = {}
    for name, f in fns.items():
        ts_ = []
        for _ in range(reps):
            for _ in range(5):
                f()
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(n):
                f()
            ts_.append((time.perf_counter() - t0) / n * 1e6)
            torch.cuda.synchronize()
        res[name] = {"min": round(min(ts_), 2), "median": round(statistics.median(ts_), 2)}
        print(f"pieces rmsnorm_rope qwen3-8b-t4096 {name:12} host min {res[name]['min']:6.1f} median "
              f"{res[name]['median']:6.1f} us", flush=True)
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--rows", default=",".join(ROWS))
    ap.add_argument("--switch", choices=("fast", "plans"), default="fast",
                    help="what off / on toggles: the short path (round 23) or only its launch plans (round 24)")
    ap.add_argument("--pieces", action="store_true")
    ap.add_argument("--profile", default="", help="op:shape:variant,...: cProfile's top functions over 300 "
                    "calls each, the short path on")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    meta = stamp(header("cuda"))
    print(meta, flush=True)
    rows, checks = [], []
    for spec in args.rows.split(","):
        op, shape = spec.split(":")
        w = get(op)
        if shape not in w.shapes:
            print(f"skip {spec}: no such shape", flush=True)
            continue
        s = w.setup(w.shapes[shape], "bf16", "cuda")
        for v in w.variants:
            lab = v in ("triton", "triton_direct", "triton_gathered")
            if not (lab or v in PEERS):
                continue
            call = w.variants[v]
            try:
                call(s)
            except NotImplementedError as e:  # a peer that refuses this shape (Liger's RoPE: partial rotary)
                print(f"{op:12} {shape:16} {v:15} skipped: {e}", flush=True)
                continue
            times = {"off": [], "on": []}
            for side in ("off", "on", "off", "on"):
                toggle(args.switch, side == "on")
                times[side].append(host_and_gpu(call, s))
            toggle(args.switch, True)
            row = dict(op=op, shape=shape, variant=v)
            for side, ts in times.items():
                row[f"host_us_{side}"] = [round(t[0], 2) for t in ts]
                row[f"events_us_{side}"] = [round(t[1], 2) for t in ts]
            rows.append(row)
            print(f"{op:12} {shape:16} {v:15} host off {min(row['host_us_off']):7.1f} on {min(row['host_us_on']):7.1f} us"
                  f" | events off {min(row['events_us_off']):7.1f} on {min(row['events_us_on']):7.1f} us", flush=True)
            if lab:
                toggle(args.switch, False)
                ref = [t.clone() for t in flat(call(s))]
                toggle(args.switch, True)
                h0 = hits()
                got = call(s)
                ok = same(ref, got)
                took = hits() - h0
                graph_ok = None
                if v == "triton_direct" or op in ("rmsnorm", "rope", "rmsnorm_rope", "add_rmsnorm", "swiglu"):
                    st = torch.cuda.Stream()
                    st.wait_stream(torch.cuda.current_stream())
                    with torch.cuda.stream(st):
                        call(s)
                    torch.cuda.current_stream().wait_stream(st)
                    g = torch.cuda.CUDAGraph()
                    with torch.cuda.graph(g):
                        gout = call(s)
                    g.replay()
                    torch.cuda.synchronize()
                    graph_ok = same(ref, gout)
                checks.append(dict(op=op, shape=shape, variant=v, bit_equal=ok, fast_launches=took, graph_equal=graph_ok))
                print(f"   check {op} {shape} {v}: bit-equal {ok}, short-path launches {took}, graph replay equal "
                      f"{graph_ok}", flush=True)
    _launch.ENABLED = _launch.PLANS = True
    pieces = pieces_rmsnorm_rope(out) if args.pieces else None
    for spec in filter(None, args.profile.split(",")):
        op, shape, v = spec.split(":")
        w = get(op)
        s = w.setup(w.shapes[shape], "bf16", "cuda")
        call = w.variants[v]
        for _ in range(5):
            call(s)
        torch.cuda.synchronize()
        pr = cProfile.Profile()
        pr.enable()
        for _ in range(300):
            call(s)
        pr.disable()
        torch.cuda.synchronize()
        buf = io.StringIO()
        pstats.Stats(pr, stream=buf).sort_stats("tottime").print_stats(22)
        (out / f"host23_profile_{op}_{shape}_{v}.txt").write_text(buf.getvalue())
        print(f"== cProfile {spec}\n" + "\n".join(buf.getvalue().splitlines()[:34]), flush=True)
    summary = []
    for r in rows:
        off, on = statistics.median(r["host_us_off"]), statistics.median(r["host_us_on"])
        summary.append(f"{r['op']} {r['shape']} {r['variant']}: host {off:.1f} -> {on:.1f} us ({off / on:.2f}x)")
    print("\n".join(summary), flush=True)
    (out / "host23.json").write_text(json.dumps(dict(meta=meta, switch=args.switch, rows=rows, checks=checks,
                                                     pieces=pieces), indent=1))


if __name__ == "__main__":
    main()
