#!/usr/bin/env python3
"""Round 8 (issue 21 item 1): softmax over vocabulary rows, v4's row groups against v3's two passes.

v3 reads a long row twice (the second read an L2 hit), one program per row walking it: 65-73 % of
copy on the H100, 55-61 % on the H200, latency-bound (ncu: DRAM 70 % busy, 1.07x the minimum
bytes). v4 (`_softmax_rowgroup`) gives a row to K co-resident programs, each holding its chunk in
registers: one read, one write. Per vocabulary shape:
- float64 check of every candidate launch (the workload's check) first;
- every launch candidate of the long-row path timed alone (do_bench median, and CUDA-graph replay
  where the cooperative launch can be captured), with the compiled kernel's registers;
- round-robin over R rounds (do_bench, L2 flushed): the registered `triton` (the tuner's pick),
  `triton_twopass` (v3), torch.compile and a copy of the same bytes; medians, % of copy.

Round 8's probes (the partials through a counter and a separate read, the wait left out, two
rows ahead, exp recomputed, no row ahead, the late finish) ran through this script's PROBE mode,
removed with the probe knobs once the kernel settled: the code at commits 950075c (counter,
SYNC, DEPTH 2, LAG), e6b3a1b (RECOMPUTE), ae96052 (DEPTH 0); results in benchmarks/results/r8/*p*/.

Round 13: the thread-local exponentials ("_loc") and the 16-bit held exponentials ("_h2") among
the candidates; the round-robin is SOFTMAX_RR's variants (default `triton`, `triton_r12`,
`triton_h2`, compile) and a copy (round 12's also had v3 and `triton_r11`); SOFTMAX_KINDS=a,b
sweeps the candidates whose kind contains one of those.

Round 27: the L2-held launches (`L2_CANDIDATES`, kinds "l2*": rows read once, held in the L2
between a chunk's partial and its output, not in registers) are swept too (SOFTMAX_KINDS=l2 for
those alone), their registers beside v4's; `triton_l2` is the tuner with them among its launches.

Round 12: the row-group launches with the L2 prefetch (kinds "*_pf1", "*_pf2") are among the
candidates, and `triton_r11` (the tuner without them) joins the round-robin; SOFTMAX_GROUPS_ONLY=1
sweeps the row-group candidates only (v3's persistent launches are known to be slower there).

    python3 benchmarks/gpu/softmax_group.py [--rounds 5] [--out DIR] [--shapes a,b]   # -> DIR/softmax_group.json
    python3 benchmarks/gpu/softmax_group.py --summary DIR/softmax_group.json   # its sweep, a line a launch
"""
import json
import os
import sys

import torch

from profkit.kernels import softmax as K
from profkit.kernels.timing import stamp, tuned_choices

sys.path.insert(0, os.path.dirname(__file__))
from fp8_launch import device_cli, round_robin  # noqa: E402


def regs(fn):
    """(registers, spills) of each compiled specialisation of a Triton kernel, where Triton says."""
    out = []
    try:
        for caches in fn.device_caches.values():
            for k in caches[0].values():
                out.append((getattr(k, "n_regs", None), getattr(k, "n_spills", None), k.metadata.num_warps))
    except Exception as e:  # noqa: BLE001  (the cache layout differs between Triton versions)
        out.append(repr(e)[:80])
    return out


def summary(path):
    """One line a swept launch of a softmax_group.json: its check's error, or why it did not run,
    and its do_bench and graph-replay times; then the compiled kernels' registers."""
    d = json.load(open(path))
    for r in d["rows"]:
        if "config" in r:
            got = "err %.1e" % r["err"] if "err" in r else r.get("error", "")[:60]
            times = ("do_bench %.1f" % (r["ms"] * 1e3) if "ms" in r else "",
                     "graph %.1f" % (r["graph_ms"] * 1e3) if "graph_ms" in r else "")
            print(r["shape"][:12], str(r["config"]).ljust(40), got, *times)
    print("regs", d.get("regs_rowgroup"))
    print("regs l2hold", d.get("regs_l2hold"))


def main():
    if sys.argv[1:2] == ["--summary"]:
        summary(sys.argv[2])
        return
    args, w, shapes, hdr, bench, gbench = device_cli("softmax", 5, lambda p: p["n"] > K.MAX_SINGLE and p["rows"] > 2)
    rows = []
    for name, p in shapes.items():
        s = w.setup(p, "bf16", "cuda")
        x = s["x"]
        ref = K.softmax_reference(x)
        y = torch.empty_like(x)
        nbytes = 2 * x.numel() * x.element_size()
        sweep = K.GROUP_CANDIDATES + K.L2_CANDIDATES  # round 27: the L2-held launches too
        if os.environ.get("SOFTMAX_GROUPS_ONLY") != "1":
            sweep = K.ONLINE_CANDIDATES + sweep
        if os.environ.get("SOFTMAX_KINDS"):  # e.g. "_loc,_h2,group_lag_pf1": kinds containing any of these
            sweep = [c for c in sweep if any(t in c[0] for t in os.environ["SOFTMAX_KINDS"].split(","))]
        for cfg in sweep:
            row = {"shape": name, "config": list(cfg), **stamp(hdr)}
            try:
                K.softmax(x, out=y, config=cfg)
                torch.cuda.synchronize()
                err = ((y.double() - ref).abs().max() / ref.abs().max()).item()
                row["err"] = err
                row["ms"] = bench(lambda: K.softmax(x, out=y, config=cfg))
                row["gbps"] = nbytes / row["ms"] / 1e6
                try:
                    row["graph_ms"] = gbench(lambda: K.softmax(x, out=y, config=cfg))
                except Exception as e:  # noqa: BLE001
                    row["graph_err"] = f"{type(e).__name__}: {str(e)[:120]}"
            except Exception as e:  # noqa: BLE001
                row["error"] = f"{type(e).__name__}: {str(e)[:160]}"
            rows.append(row)
            print(json.dumps(row), flush=True)
        dst = torch.empty_like(x)
        rr = os.environ.get("SOFTMAX_RR", "triton,triton_r12,triton_h2,compile").split(",")  # the first: the ratios' base
        fns = {v: (lambda v=v: w.variants[v](s)) for v in rr}
        fns["copy"] = lambda: dst.copy_(x)
        for v in fns:
            if v == "copy":
                continue
            out = fns[v]()
            torch.cuda.synchronize()
            print(f"   check {name} {v}: rel err {((out.double() - ref).abs().max() / ref.abs().max()).item():.2e}")
        times, med = round_robin(fns, bench, args.rounds)
        gtimes = {}
        for v, fn in fns.items():
            try:
                gtimes[v] = gbench(fn)
            except Exception as e:  # noqa: BLE001
                gtimes[v] = f"{type(e).__name__}: {str(e)[:100]}"
        summ = {"shape": name, "rr_ms": med, "rr_all": times, "graph_ms": gtimes, "bytes": nbytes,
                "pct_copy": {v: 100 * med["copy"] / med[v] for v in med},
                "x": {v: med[v] / med[rr[0]] for v in med},
                **stamp(hdr)}
        rows.append(summ)
        print(f"{name}: " + "  ".join(f"{v} {med[v] * 1e3:.1f} us ({summ['pct_copy'][v]:.0f} % copy)" for v in med)
              + f"  " + "  ".join(f"x {v} {r:.3f}" for v, r in summ["x"].items()), flush=True)
        print(f"   graph: {gtimes}", flush=True)
        del s, x, y, ref, dst
        torch.cuda.empty_cache()
    extra = {"regs_rowgroup": regs(K._softmax_rowgroup), "regs_online": regs(K._softmax_online_persistent),
             "regs_l2hold": regs(K._softmax_l2hold),
             "tuned": {k: v for k, v in tuned_choices().items() if "softmax" in k or k == "_errors"}}
    print(json.dumps(extra, default=str), flush=True)
    with open(os.path.join(args.out, "softmax_group.json"), "w") as f:
        json.dump({"header": hdr, "rows": rows, **extra}, f, indent=1, default=str)


if __name__ == "__main__":
    main()
