#!/usr/bin/env python3
"""Round 6 (issue 21): the 1-token decode cells, where the lab was still behind the faster of
torch.compile and Liger by CUDA-graph replay (GPU time): softmax llama3vocab-t1, swiglu, rope,
rmsnorm and add_rmsnorm llama8b-t1.

Per cell, each timed alone: the peers (torch.compile of the eager function, Liger where installed
and where it takes the shape), the lab's launch before round 6 (softmax triton_rowprog, swiglu
triton_v1, rope triton_tokenprog, the norms triton_untuned), the lab's new default (triton: its
tuner picks among the candidates by graph replay on the first call), and every tuning candidate
of the new path alone (so the pick can be read against the rest). Every output is first checked
against the float64 reference (the workload's own check). Then R rounds, round-robin over every
cell and function (the order rotated each round), each timed by the lab's graph_timer
(kernels/timing: do_bench_cudagraph median, inputs rotated over copies as benchmarks/kernels.py
--graph does); per function the median of the R round medians.

    python3 benchmarks/gpu/decode_sweep.py [--rounds 5] [--out DIR]   # -> DIR/decode_sweep.json
    python3 benchmarks/gpu/decode_sweep.py --cpu-smoke [--out DIR]     # CPU, TRITON_INTERPRET=1,
                                         # no torch.compile, host clock: the plumbing only

Imports the operators from the installed package (profkit.kernels): run it from outside the
checkout (device_env.sh moves to /tmp).
"""
from __future__ import annotations

import os
import sys

if "--cpu-smoke" in sys.argv:  # before triton is imported anywhere
    os.environ["TRITON_INTERPRET"] = "1"

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

HERE = Path(__file__).resolve().parent
DTYPE = "bf16"
# op -> (shape, the lab's launch before round 6)
CELLS = {"softmax": ("llama3vocab-t1", "triton_rowprog"), "swiglu": ("llama8b-t1", "triton_v1"),
         "rope": ("llama8b-t1", "triton_tokenprog"), "rmsnorm": ("llama8b-t1", "triton_untuned"),
         "add_rmsnorm": ("llama8b-t1", "triton_untuned")}
PEERS = ("compile", "liger")
# op -> how the key of the new path's tuner (kernels/timing.tuned) starts, as tuned_choices() writes it
TUNER = {"softmax": "('softmax_split',", "swiglu": "('swiglu_fwd', 'small',", "rope": "('rope_heads',",
         "rmsnorm": "('rmsnorm_fwd', 'decode',", "add_rmsnorm": "('add_rmsnorm', 'decode',"}


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def candidates(op: str, p: dict) -> dict:
    """name -> fn(state) for each tuning candidate of the new path at shape params p (the
    candidate lists are the kernel modules' own)."""
    from profkit.kernels import add_rmsnorm as A
    from profkit.kernels import rmsnorm as RN
    from profkit.kernels import rope as RO
    from profkit.kernels import softmax as SM
    from profkit.kernels import swiglu as SW

    def each(cands, call):
        return {f"cand{tuple(c)}": (lambda c: lambda s: call(s, c))(c) for c in cands}

    if op == "softmax":  # a 2-tuple config: the split-row kernels
        return each(SM.SPLIT_CANDIDATES, lambda s, c: SM.softmax(s["x"], config=c))
    if op == "swiglu":
        return each(SW.SMALL_CANDIDATES, lambda s, c: SW.swiglu_fwd(s["gate"], s["up"], config=c))
    if op == "rope":
        rd = p.get("rotary_dim", p["head_dim"])
        return each(RO.head_candidates(p["q_heads"], p["kv_heads"], rd // 2),
                    lambda s, c: RO.rope(s["q"], s["k"], s["cos"], s["sin"], s["pos"], s["rotary_dim"],
                                         s["interleaved"], config=c))
    norm = [(bm, nw, ev) for ev in (True, False) for bm, nw in RN.decode_candidates(p["hidden"])]
    if op == "rmsnorm":
        return each(norm, lambda s, c: RN.rmsnorm_fwd(s["x"], s["w"], config=c))
    if op == "add_rmsnorm":
        return each(norm, lambda s, c: A.add_rmsnorm(s["x"], s["r"], s["w"], config=c))
    raise KeyError(op)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--ops", default=",".join(CELLS), help="comma list of cells (default: all five)")
    ap.add_argument("--no-compile", action="store_true", help="leave torch.compile out")
    ap.add_argument("--rep-ms", type=float, default=10.0, help="graph_timer repetition time per timing")
    ap.add_argument("--budget-s", type=float, default=200.0,
                    help="no new round once this many seconds have passed (at least one round runs)")
    ap.add_argument("--cpu-smoke", action="store_true", help="CPU, TRITON_INTERPRET=1, 1 round, no compile")
    a = ap.parse_args(argv)
    t0 = time.perf_counter()
    import torch

    from profkit.kernels import get
    from profkit.kernels.timing import fresh, graph_timer, header, n_copies, rotating, stamp, timer, tuned_choices

    device = "cpu" if a.cpu_smoke else "cuda"
    if device == "cuda" and not torch.cuda.is_available():
        log("no CUDA device: use --cpu-smoke for the CPU plumbing run")
        return 2
    if a.cpu_smoke:
        a.rounds, a.no_compile = 1, True
    hdr = header(device)
    row_stamp = stamp(hdr)
    print(json.dumps(row_stamp), flush=True)
    bench = graph_timer(rep_ms=a.rep_ms) if device == "cuda" else timer("cpu")

    # --- per cell: inputs, every function checked once (first calls: compile, tune) ---------
    cells, rows = {}, []
    for op in a.ops.split(","):
        shape, old = CELLS[op]
        w = get(op)
        p = w.shapes[shape]
        state = w.setup(p, DTYPE, device)
        ref_state = fresh(state)  # the reference reads untouched inputs (Liger's RoPE rotates in place)
        states = [state] + [w.setup(p, DTYPE, device) for _ in range(n_copies(state, device) - 1)]
        fns = {}
        for v in [*PEERS, old, "triton"]:
            row = dict(op=op, shape=shape, dtype=DTYPE, variant=v, params=p, **row_stamp,
                       role="peer" if v in PEERS else "old" if v == old else "new")
            why = w.available(v) or ("--no-compile" if v == "compile" and a.no_compile else None)
            if why:
                rows.append({**row, "skipped": why})
                continue
            fns[v] = (row, w.variants[v], v)
        for name, fn in candidates(op, p).items():
            fns[name] = (dict(op=op, shape=shape, dtype=DTYPE, variant=name, params=p, role="candidate",
                              **row_stamp), fn, "triton")
        live = {}
        for name, (row, fn, as_variant) in fns.items():
            t = time.perf_counter()
            try:
                out = fn(fresh(state))
                r = w.check(ref_state, as_variant, out, DTYPE)
                row.update(rel_err=r.rel_err, tol=r.tol, ok=r.ok, first_call_s=round(time.perf_counter() - t, 2))
                if r.ok:
                    live[name] = (row, rotating(fn, states))
                else:
                    row["error"] = f"wrong result: {r}"
            except Exception as e:  # noqa: BLE001  (Liger refusing a 128k row, a config that fails: say so)
                row["error"] = f"{type(e).__name__}: {str(e)[:200]}"
            if device == "cuda":
                torch.cuda.synchronize()
            rows.append(row)
            log(f"{op}/{name}: {'ok' if row.get('ok') else row.get('error')} ({time.perf_counter() - t:.1f} s)")
        cells[op] = live
    log(f"checked and warm: {time.perf_counter() - t0:.0f} s")

    # --- rounds: round-robin over every cell and function, the order rotated each round ------
    order = [(op, name) for op, live in cells.items() for name in live]
    times = {k: [] for k in order}
    done = 0
    for i in range(a.rounds):
        if done and time.perf_counter() - t0 > a.budget_s:
            log(f"time budget ({a.budget_s:.0f} s) spent after {done} rounds")
            break
        t = time.perf_counter()
        k0 = (i * 7) % max(1, len(order))
        for op, name in order[k0:] + order[:k0]:
            row, call = cells[op][name]
            try:
                times[(op, name)].append(bench(call))
            except Exception as e:  # noqa: BLE001  (a function that cannot be captured in a graph)
                row["graph_error"] = f"{type(e).__name__}: {str(e)[:200]}"
                if device == "cuda":
                    torch.cuda.synchronize()
        done += 1
        log(f"round {i + 1}: {time.perf_counter() - t:.1f} s")

    # --- medians, speed-ups against the faster peer and the old launch -----------------------
    for (op, name), ts in times.items():
        row = cells[op][name][0]
        if ts:
            row.update(us=statistics.median(ts) * 1e3, us_rounds=[round(x * 1e3, 4) for x in ts])
    for op in cells:
        mine = [r for r in rows if r["op"] == op and "us" in r]
        peers = {r["variant"]: r["us"] for r in mine if r["role"] == "peer"}
        old = next((r["us"] for r in mine if r["role"] == "old"), None)
        best = min(peers, key=peers.get) if peers else None
        for r in mine:
            if r["role"] != "peer" and best:
                r["best_peer"], r["x_best_peer"] = best, peers[best] / r["us"]
            if r["role"] in ("new", "candidate") and old:
                r["x_old"] = old / r["us"]
    tuned = {k: v for k, v in tuned_choices().items() if any(k.startswith(t) for t in TUNER.values())}
    for r in rows:  # the tuner's pick beside the new default's time
        if r["role"] == "new":
            r["pick"] = next((v["config"] for k, v in tuned.items() if k.startswith(TUNER[r["op"]])), None)
    wall = round(time.perf_counter() - t0, 1)
    result = dict(header=hdr, rounds=done, rounds_asked=a.rounds, wall_s=wall,
                  timing=("kernels/timing.graph_timer (do_bench_cudagraph median, rep %g ms), inputs rotated "
                          "over kernels/timing.n_copies copies; per row the median of the round medians" % a.rep_ms
                          if device == "cuda" else "CPU smoke: host clock of one call (plumbing only)"),
                  rows=rows, tuned=tuned)
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "decode_sweep.json"), "w") as f:
        json.dump(result, f, indent=1, default=str)
    print(table(rows))
    print(f"{done} rounds, {wall} s; every candidate's row in {os.path.join(a.out, 'decode_sweep.json')}")
    bad = [r for r in rows if r["role"] != "peer" and (r.get("error") or r.get("ok") is False)]
    return 1 if bad else 0


def table(rows: list) -> str:
    """Per cell: the peers, the old launch, the new default (with the tuner's pick), and the
    fastest and slowest candidates: the median of the rounds, their range, x the faster peer,
    x the old launch. Failed and skipped functions say why."""
    out = [f"{'op/shape':26} {'variant':30} {'role':9} {'us':>7} {'range':>13} {'x peer':>6} {'x old':>6}  note"]

    def line(r, note=""):
        head = f"{r['op'] + '/' + r['shape']:26} {r['variant']:30} {r['role']:9}"
        if "us" not in r:
            why = f"skip: {r['skipped']}" if "skipped" in r else r.get("error") or r.get("graph_error", "-")
            return f"{head} {'':7} {'':13} {'':6} {'':6}  {why[:80]}"
        lo, hi = min(r["us_rounds"]), max(r["us_rounds"])
        xp = f"{r['x_best_peer']:.2f}" if "x_best_peer" in r else ""
        xo = f"{r['x_old']:.2f}" if "x_old" in r else ""
        return f"{head} {r['us']:7.2f} {f'{lo:.2f}-{hi:.2f}':>13} {xp:>6} {xo:>6}  {note}"

    for op in dict.fromkeys(r["op"] for r in rows):
        mine = [r for r in rows if r["op"] == op]
        cands = sorted((r for r in mine if r["role"] == "candidate" and "us" in r), key=lambda r: r["us"])
        for r in mine:
            if r["role"] != "candidate":
                out.append(line(r, f"pick {r.get('pick')}" if r["role"] == "new" else ""))
            elif "us" not in r:
                out.append(line(r))
        if cands:
            out.append(line(cands[0], f"fastest of {len(cands)} candidates"))
            out.append(line(cands[-1], "slowest"))
    return "\n".join(out)


if __name__ == "__main__":
    sys.exit(main())
