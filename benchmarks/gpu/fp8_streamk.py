#!/usr/bin/env python3
"""Round 7 (issue 21 item 3): v3 with a stream-K tail (fp8_gemm_streamk) against v3 and
torch._scaled_mm at every registered M >= 1024 shape, both scale modes:
- float64 check of every variant first (the workload's own check);
- round-robin over R rounds (the lab's do_bench timer, L2 flushed), median of the R;
- GPU time only: CUDA-graph replay of each (the lab's graph_timer);
- host time per call.

    python3 benchmarks/gpu/fp8_streamk.py [--rounds 5] [--out DIR] [--shapes a,b]   # -> DIR/fp8_streamk.json
"""
import json
import os
import sys

import torch

from profkit.kernels import fp8_gemm as F
from profkit.kernels.timing import stamp

sys.path.insert(0, os.path.dirname(__file__))
from fp8_launch import device_cli, host_us, round_robin  # noqa: E402

MODES = {"row": ("triton_streamk", "triton_promote", "scaled_mm"),
         "tensor": ("triton_streamk_tensor", "triton_promote_tensor", "scaled_mm_tensor")}


def dump_ir(out_dir):
    """Every compiled v3 / stream-K kernel's registers, spills, shared memory and TTGIR (to see
    whether the installed Triton pipelined each loop): DIR/ir_*.ttgir, returned as a list."""
    res = []
    for cache in [c for fn in (F._fp8_gemm_pchunk, F._fp8_gemm_sktail) for c in fn.device_caches.values()]:
        kernels = cache[0] if isinstance(cache, tuple) else cache
        for i, k in enumerate(getattr(kernels, "values", lambda: [])()):
            ir = k.asm.get("ttgir", "")
            name = f"ir_{len(res)}{'_sk' if 'atomic_rmw' in ir else ''}.ttgir"
            with open(os.path.join(out_dir, name), "w") as f:
                f.write(ir)
            res.append(dict(file=name, n_regs=getattr(k, "n_regs", None), n_spills=getattr(k, "n_spills", None),
                            shared=getattr(k.metadata, "shared", None), scf_for=ir.count("scf.for"),
                            tma_loads=ir.count("async_tma_copy_global_to_local"), wgmma=ir.count("warp_group_dot ")))
            print("   ir", res[-1], flush=True)
    return res


def main():
    args, w, shapes, hdr, bench, gbench = device_cli("fp8_gemm", 5, lambda p: p["M"] >= 1024)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    rows = []
    for shape, p in shapes.items():
        state = w.setup(p, "fp8", "cuda")
        fns, checks = {}, {}
        for mode, names in MODES.items():
            for v in names:
                r = w.check(state, v, w.variants[v](state), "fp8")
                checks[v] = str(r)
                assert r.ok, (shape, v, str(r))
                fns[v] = (lambda v: lambda: w.variants[v](state))(v)
        torch.cuda.synchronize()
        times, med = round_robin(fns, bench, args.rounds)
        graph = {v: gbench(fn) for v, fn in fns.items()}
        host = {v: host_us(fn, 50) for v, fn in fns.items()}
        bm, bn = F.STREAMK_TILE[:2]
        tiles = -(-p["M"] // bm) * -(-p["N"] // bn)
        for mode, (sk, v3, peer) in MODES.items():
            for v in (sk, v3, peer):
                row = dict(shape=shape, mode=mode, variant=v, ms=med[v], ms_all=times[v], peer=peer,
                           pct_peer=100 * med[peer] / med[v], graph_ms=graph[v], graph_pct_peer=100 * graph[peer] / graph[v],
                           host_us_per_call=round(host[v], 1), check=checks[v], tiles=tiles, sk_tiles=tiles % sms,
                           **stamp(hdr))
                rows.append(row)
                print(f"{shape:20} {v:24} {med[v] * 1e3:7.1f} us [{min(times[v]) * 1e3:.1f}-{max(times[v]) * 1e3:.1f}] "
                      f"{row['pct_peer']:5.1f} % of {peer:17} graph {graph[v] * 1e3:7.1f} us ({row['graph_pct_peer']:5.1f} %)"
                      f"  host {host[v]:.0f} us", flush=True)
        del state, fns
        torch.cuda.empty_cache()
    os.makedirs(args.out, exist_ok=True)
    try:
        ir = dump_ir(args.out)
    except Exception as e:  # noqa: BLE001 - Triton internals: a note, not the measurement
        ir = f"not read: {type(e).__name__}: {e}"
    with open(os.path.join(args.out, "fp8_streamk.json"), "w") as f:
        json.dump(dict(header=hdr, rounds=args.rounds, rows=rows, ir=ir,
                       autotune=F.autotune_choices().get("fp8_gemm.promote")), f, indent=1)


if __name__ == "__main__":
    main()
