#!/usr/bin/env python3
"""End to end: the decoder stack (profkit.kernels.decoder) with and without the lab kernels.

    python3 benchmarks/e2e.py --out DIR [--models llama3-8b,qwen2.5-7b] [--layers 4]
                              [--tokens 128,256,...] [--steps 200] [--context 448] [--full-depth]
    python3 benchmarks/e2e.py --timeline DB --out DIR    # operator shares + launch overhead from
                                                          # nsys captures loaded into DB
    python3 benchmarks/e2e.py --selftest [--out DIR]      # CPU, TRITON_INTERPRET=1, tiny config

Per model (bf16, random seeded weights, `--layers` decoder layers + final norm):
1. correctness: prefill (128 tokens) of both paths and one decode step of every decode
   variant against the float64 reference forward (decoder.reference_forward, on the GPU),
   tolerance decoder.tolerance(dtype, layers);
2. prefill latency for each token count: eager vs lab, interleaved repetitions, CUDA events
   around each forward with a synchronize after it; median (and min) ms;
3. decode: the cache filled by a `--context` prefill, then `--rounds` rounds of `--steps`
   steps from that position, the variants (eager, lab, lab_fused_linear, graph, graph_lab,
   graph_lab_fused_linear) taking turns within a round; each step is synchronized, timed by
   CUDA events (start recorded before the step's first launch, end after its last) and by
   the host clock (until the launches returned, and to the end of the synchronize);
   p50 / p95 / mean over all steps, and each round's p50. Graphs are captured before timing.
   NVTX operator ranges are off while timing (the capture runs turn them on).
--full-depth repeats decode (and prefill at 1024 / 4096 tokens) with all 32 / 28 layers.

Writes DIR/e2e.json (rows + GPU, driver, torch/triton versions, date) and DIR/e2e.md; with
--timeline, DIR/e2e_timeline.json and the timeline section of e2e.md.
"""
from __future__ import annotations

import os
import sys

if "--selftest" in sys.argv:  # before triton is imported anywhere
    os.environ["TRITON_INTERPRET"] = "1"

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

DECODE_VARIANTS = ("eager", "lab", "lab_fused_linear", "lab_gated_mlp", "graph", "graph_lab",
                   "graph_lab_fused_linear", "graph_lab_gated_mlp")
PUBLISHED = {"prefill_gain_pct": (3, 10), "decode_graph_p50_ms": 0.156, "decode_graph_p95_ms": 0.230}


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def env_info(device: str) -> dict:
    from profkit.core.environment import result_header

    return result_header(device)


def pct(xs, q):
    """Nearest-rank percentile (q in 0..100) of a non-empty list."""
    import math

    s = sorted(xs)
    return s[min(len(s) - 1, max(0, math.ceil(q / 100 * len(s)) - 1))]


class Clock:
    """CUDA events on a GPU, the host clock on the CPU (selftest)."""

    def __init__(self, device: str):
        self.cuda = device == "cuda"

    def time(self, fn) -> tuple[float, float, float]:
        """(event ms, host ms, issue ms) of fn() followed by a synchronize: events around the
        launches, host clock to the end of the synchronize, and host clock until fn returned
        (the CPU time to issue the work)."""
        import torch

        if self.cuda:
            torch.cuda.synchronize()
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            t0 = time.perf_counter()
            a.record()
            fn()
            b.record()
            issue = (time.perf_counter() - t0) * 1e3
            torch.cuda.synchronize()
            host = (time.perf_counter() - t0) * 1e3
            return a.elapsed_time(b), host, issue
        t0 = time.perf_counter()
        fn()
        host = (time.perf_counter() - t0) * 1e3
        return host, host, host


# --- one model -------------------------------------------------------------------------------

def check_rows(D, m, x_pre, x_ctx, x1, runners) -> list[dict]:
    """Prefill of both paths and one decode step per variant vs the float64 reference."""
    from profkit.kernels._numerics import rel_err

    cfg = m.cfg
    tol = D.tolerance(m.dtype_name, cfg.layers)
    rows = []
    ref, _ = D.reference_forward(m, x_pre)
    outs = {}
    for path in ("eager", "lab", "lab_gated_mlp"):
        outs[path] = m.prefill(x_pre, D.PATHS[path])
        e = rel_err(outs[path], ref)
        rows.append({"check": f"prefill t{x_pre.shape[0]}", "variant": path, "rel_err": e, "tol": tol, "ok": e <= tol})
    e = rel_err(outs["lab"], outs["eager"])
    rows.append({"check": f"prefill t{x_pre.shape[0]}", "variant": "lab vs eager", "rel_err": e, "tol": 2 * tol,
                 "ok": e <= 2 * tol})
    ctx = x_ctx.shape[0]
    _, past = D.reference_forward(m, x_ctx)
    ref1, _ = D.reference_forward(m, x1, start=ctx, past=past)
    del past
    m.prefill(x_ctx)
    for v, r in runners.items():
        try:
            e = rel_err(r.step(x1, ctx).clone(), ref1)
        except Exception as exc:
            log(f"check decode {v}: {type(exc).__name__}: {exc}")
            e = float("inf")
        rows.append({"check": f"decode at {ctx}", "variant": v, "rel_err": e, "tol": tol, "ok": e <= tol})
    return rows


def bench_model(name: str, layers: int, tokens: list[int], steps: int, context: int, device: str, dtype: str,
                variants=DECODE_VARIANTS, check_tokens: int = 128, min_reps: int = 5, max_reps: int = 30,
                target_s: float = 0.4, max_seq: int | None = None, rounds: int = 3) -> dict:
    import torch
    from profkit.kernels import decoder as D
    from profkit.kernels.e2e import _inputs

    clock = Clock(device)
    cfg = D.config(name, layers=layers, max_seq=max_seq or max(max(tokens, default=0), 4096))
    m = D.Decoder(cfg, dtype, device, seed=0)
    out = {"model": name, "layers": layers, "dtype": dtype, "params_per_layer": cfg.layer_params(),
           "weight_bytes": m.weight_bytes(),
           "checks": [], "prefill": [], "decode": []}
    graph_ok = device == "cuda"
    runners = {v: D.DecodeRunner(m, D.PATHS[v.removeprefix("graph_")] if v.startswith("graph_") else
                                 (D.EAGER if v == "graph" else D.PATHS[v]), graph=v.startswith("graph"))
               for v in variants if graph_ok or not v.startswith("graph")}

    # 1. correctness
    t0 = time.time()
    out["checks"] = check_rows(D, m, _inputs(cfg, check_tokens, dtype, device, 11), _inputs(cfg, context, dtype, device, 1),
                               _inputs(cfg, 1, dtype, device, 2), runners)
    log(f"{name} l{layers}: checks {[(c['variant'], round(c['rel_err'], 5)) for c in out['checks']]} "
        f"({time.time() - t0:.1f} s)")

    # 2. prefill: eager and lab interleaved
    for T in tokens:
        x = _inputs(cfg, T, dtype, device, 3)
        fns = {p: (lambda p: (lambda: m.prefill(x, D.PATHS[p])))(p) for p in ("eager", "lab")}
        for f in fns.values():  # warm-up: compile, cuBLAS heuristics, allocator
            for _ in range(2):
                clock.time(f)
        times: dict[str, list[float]] = {p: [] for p in fns}
        t_start = time.perf_counter()
        while True:
            for p, f in fns.items():
                times[p].append(clock.time(f)[0])
            n = len(times["eager"])
            if n >= max_reps or (n >= min_reps and time.perf_counter() - t_start > target_s):
                break
        row = {"tokens": T}
        for p, ts in times.items():
            row[f"{p}_ms"] = statistics.median(ts)
            row[f"{p}_min_ms"] = min(ts)
        row["reps"] = len(times["eager"])
        row["lab_gain_pct"] = 100.0 * (row["eager_ms"] - row["lab_ms"]) / row["eager_ms"]
        out["prefill"].append(row)
        log(f"{name} l{layers} prefill t{T}: eager {row['eager_ms']:.3f} ms, lab {row['lab_ms']:.3f} ms "
            f"({row['lab_gain_pct']:+.1f} %)")
        del x

    # 3. decode: `rounds` rounds, the variants in turn within each round, each round from the context
    m.prefill(_inputs(cfg, context, dtype, device, 1))
    positions = [context + i for i in range(steps)]
    samples: dict[str, dict[str, list]] = {}
    for v, r in runners.items():
        r.x.copy_(_inputs(cfg, 1, dtype, device, 2))
        try:
            if r.graph:
                r.capture_all(positions)
            for p in positions[:5]:  # warm-up
                clock.time(lambda: r.step(None, p))
        except Exception as exc:  # one variant failing (say a capture) must not cost the others
            out.setdefault("decode_skipped", {})[v] = f"failed: {type(exc).__name__}: {str(exc)[:200]}"
            log(f"{name} l{layers} decode {v}: {out['decode_skipped'][v]}")
            continue
        samples[v] = {"ev": [], "host": [], "issue": [], "round_p50": []}
    for _ in range(rounds):
        for v, smp in samples.items():
            r = runners[v]
            ev = []
            for p in positions:
                e, h, i = clock.time(lambda: r.step(None, p))
                ev.append(e)
                smp["host"].append(h)
                smp["issue"].append(i)
            smp["ev"] += ev
            smp["round_p50"].append(pct(ev, 50))
    for v, smp in samples.items():
        r, ev = runners[v], smp["ev"]
        row = {"variant": v, "steps": steps, "rounds": rounds, "first_position": context,
               "buckets": sorted({r.bucket(p) for p in (positions[0], positions[-1])}),
               "p50_ms": pct(ev, 50), "p95_ms": pct(ev, 95), "mean_ms": statistics.fmean(ev), "max_ms": max(ev),
               "round_p50_ms": smp["round_p50"], "host_p50_ms": pct(smp["host"], 50),
               "host_p95_ms": pct(smp["host"], 95), "issue_p50_ms": pct(smp["issue"], 50)}
        out["decode"].append(row)
        log(f"{name} l{layers} decode {v}: p50 {row['p50_ms']:.3f} ms p95 {row['p95_ms']:.3f} ms "
            f"(rounds {[round(x, 3) for x in row['round_p50_ms']]}, issue p50 {row['issue_p50_ms']:.3f})")
    eager = next((d for d in out["decode"] if d["variant"] == "eager"), None)
    for d in out["decode"]:
        d["speedup_p50_vs_eager"] = eager["p50_ms"] / d["p50_ms"] if eager else None
    if not graph_ok:
        out.setdefault("decode_skipped", {}).update(
            {v: "needs CUDA (graph capture)" for v in variants if v.startswith("graph")})
    del runners, m
    if device == "cuda":
        torch.cuda.empty_cache()
    return out


# --- timeline (nsys captures loaded into a profkit database) ---------------------------------

def timeline_report(db: str) -> dict:
    """For every run in DB: per e2e call range (forward / step) the GPU window, busy and idle
    (launch overhead) per call, and the operator shares under each variant/shape range."""
    from profkit.analyses import timeline
    from profkit.store.store import Store

    s = Store(db)
    out: dict = {"runs": {}}
    try:
        for run in s.runs():
            rows = timeline.ranges(s, run, prefix="e2e")
            calls = timeline.calls(rows)  # the `forward` / `step` ranges
            ops = {}
            for r in calls:
                scope = r["path"].rsplit("/", 1)[0]
                ops[scope] = timeline.operators(s, run, scope)
            out["runs"][run] = {"calls": calls, "operators": ops}
    finally:
        s.close()
    return out


# --- report ----------------------------------------------------------------------------------

def _f(x, nd=3):
    return "-" if x is None else f"{x:.{nd}f}"


def render(res: dict, tl: dict | None = None) -> str:
    e = res["env"]
    lines = ["# Kernel lab III: end to end (decoder stack, prefill, CUDA-graph decode)", "",
             f"Measured with `python3 benchmarks/e2e.py` ({res['mode']}) on {e['date']}.", "",
             f"GPU: {e.get('gpu') or 'none (CPU)'} (driver {e.get('driver') or '-'}), torch {e.get('torch')}, "
             f"triton {e.get('triton')}, CUDA {e.get('cuda')}, Python {e.get('python')}; "
             f"{'/'.join(sorted({m.get('dtype', 'bf16') for m in res['models']}))} weights (random, seeded), batch 1. "
             "Raw rows: `e2e.json`.", ""]
    models = res["models"]
    lines += ["## Agreement with the float64 reference", "",
              "relative L2 error of the final hidden states; tolerance `decoder.tolerance(dtype, layers)` "
              "= TOL[dtype] * sqrt(layers)", "",
              "| model | layers | check | variant | rel err | tol | ok |", "|---|---:|---|---|---:|---:|---|"]
    for m in models:
        for c in m["checks"]:
            lines.append(f"| {m['model']} | {m['layers']} | {c['check']} | {c['variant']} | {c['rel_err']:.2e} | "
                         f"{c['tol']:.1e} | {'yes' if c['ok'] else 'NO'} |")
    lines += ["", "## Prefill latency (median of interleaved repetitions, CUDA events)", "",
              "| model | layers | tokens | eager ms | lab ms | lab gain | eager tok/s | lab tok/s |",
              "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for m in models:
        for p in m["prefill"]:
            lines.append(f"| {m['model']} | {m['layers']} | {p['tokens']} | {p['eager_ms']:.3f} | {p['lab_ms']:.3f} | "
                         f"{p['lab_gain_pct']:+.1f} % | {p['tokens'] / p['eager_ms'] * 1e3:,.0f} | "
                         f"{p['tokens'] / p['lab_ms'] * 1e3:,.0f} |")
    lines += ["", "## Decode step latency (batch 1, one token)", "",
              "Each step synchronized; `p50`/`p95` over all steps of all rounds from CUDA events around the step "
              "(rounds: the variants take turns, each round restarting at the context); `round p50s`: the p50 of "
              "each round (the noise band); `issue`: host time until the step's launches returned; `host`: host "
              "time to the end of the synchronize.", "",
              "| model | layers | variant | steps x rounds | positions (buckets) | p50 ms | p95 ms | round p50s ms | "
              "issue p50 ms | host p50 ms | host p95 ms | p50 speed-up vs eager |",
              "|---|---:|---|---:|---|---:|---:|---|---:|---:|---:|---:|"]
    for m in models:
        for d in m["decode"]:
            rp = d.get("round_p50_ms", [d["p50_ms"]])
            lines.append(f"| {m['model']} | {m['layers']} | {d['variant']} | {d['steps']} x {d.get('rounds', 1)} | "
                         f"{d['first_position']}..{d['first_position'] + d['steps'] - 1} "
                         f"({', '.join(map(str, d['buckets']))}) | {d['p50_ms']:.3f} | {d['p95_ms']:.3f} | "
                         f"{min(rp):.3f}-{max(rp):.3f} | {_f(d.get('issue_p50_ms'))} | {d['host_p50_ms']:.3f} | "
                         f"{d['host_p95_ms']:.3f} | {_f(d['speedup_p50_vs_eager'], 2)}x |")
        for v, why in m.get("decode_skipped", {}).items():
            lines.append(f"| {m['model']} | {m['layers']} | {v} | - | - | - | - | - | - | - | - | skipped: {why} |")
    for why in res.get("skipped", []):
        lines.append(f"\nNot run: {why}.")
    if tl:
        lines += ["", "## From the timeline (nsys, `profkit timeline`)", "",
                  "nsys 2025.3 captures of `python -m profkit.kernels.run e2e/prefill|e2e/decode` by "
                  "`benchmarks/gpu/e2e.sh` (decode with `--cuda-graph-trace=node`), committed as "
                  "`profiles/e2e-decode` (the prefill capture is in git history, commit 838d2f1); tracing adds CPU time to every launch, so "
                  "eager idle shares here are higher than in the untraced timings above.", "",
                  "Per call range (`forward` = one prefill, `step` = one decode step): GPU window from its first "
                  "kernel start to its last kernel end, busy = union of its kernels, idle = window - busy (the GPU "
                  "waiting for launches: launch overhead).", "",
                  "| run | range | calls | kernels/call | launch calls/call | window us/call | busy us/call | "
                  "idle us/call | idle % |", "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
        for run, d in tl["runs"].items():
            for r in d["calls"]:
                lines.append(f"| {run} | `{r['path']}` | {r['instances']} | {r['kernels_per_instance']:.0f} | "
                             f"{r['launch_calls_per_instance']:.0f} | {r['window_us_per_instance']:,.1f} | "
                             f"{r['busy_us_per_instance']:,.1f} | {r['idle_us_per_instance']:,.1f} | "
                             f"{r['idle_pct']:.1f} |")
        lines += ["", "Operator shares of the kernel time (innermost NVTX range; graph replays have no operator "
                  "ranges: their kernels sit under `step`):", ""]
        for run, d in tl["runs"].items():
            for scope, ops in d["operators"].items():
                lines.append(f"- `{scope}`: " + ", ".join(f"{o['operator']} {o['share_pct']:.1f} %" for o in ops))
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="benchmarks/e2e.py")
    ap.add_argument("--out")
    ap.add_argument("--models", default="llama3-8b,qwen2.5-7b")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--tokens", default="128,256,512,1024,2048,4096")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--context", type=int, default=448)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--variants", default=",".join(DECODE_VARIANTS), help="decode variants (comma list)")
    ap.add_argument("--full-depth", action="store_true", help="also decode (and prefill 1024/4096) at full depth")
    ap.add_argument("--budget-s", type=float, default=None, help="skip the full-depth runs once this much time is spent")
    ap.add_argument("--timeline", metavar="DB", help="only: timeline report of nsys captures loaded into DB")
    ap.add_argument("--selftest", action="store_true", help="tiny CPU run under TRITON_INTERPRET=1")
    a = ap.parse_args(argv)
    out = Path(a.out or ("/tmp/e2e-selftest" if a.selftest else ""))
    if not a.out and not a.selftest:
        ap.error("--out DIR is required (except with --selftest)")
    out.mkdir(parents=True, exist_ok=True)
    if a.timeline:
        tl = timeline_report(a.timeline)
        (out / "e2e_timeline.json").write_text(json.dumps(tl, indent=2) + "\n")
        res_p = out / "e2e.json"
        if res_p.exists():
            (out / "e2e.md").write_text(render(json.loads(res_p.read_text()), tl))
        print(json.dumps({run: [(r["path"], round(r["idle_pct"], 1)) for r in d["calls"]]
                          for run, d in tl["runs"].items()}, indent=1))
        return 0

    import torch

    device = "cpu" if a.selftest else "cuda"
    if device == "cuda" and not torch.cuda.is_available():
        log("no CUDA device: use --selftest for the CPU smoke run")
        return 2
    res = {"env": env_info(device), "mode": "selftest" if a.selftest else "default", "published": PUBLISHED,
           "models": []}
    t0 = time.time()
    if a.selftest:
        res["models"].append(bench_model("tiny", 2, [8], steps=4, context=6, device=device, dtype="fp32",
                                         check_tokens=8, min_reps=1, max_reps=1, max_seq=32, rounds=2))
    else:
        for name in a.models.split(","):
            res["models"].append(bench_model(name, a.layers, [int(t) for t in a.tokens.split(",") if t], a.steps,
                                             a.context, device, "bf16", variants=tuple(a.variants.split(",")),
                                             rounds=a.rounds))
            (out / "e2e.json").write_text(json.dumps(res, indent=2) + "\n")  # partial results survive a timeout
        if a.full_depth:
            from profkit.kernels.decoder import config

            for name in a.models.split(","):
                if a.budget_s is not None and time.time() - t0 > a.budget_s:
                    res.setdefault("skipped", []).append(f"{name} full depth: time budget {a.budget_s:.0f} s spent")
                    log(res["skipped"][-1])
                    continue
                res["models"].append(bench_model(name, config(name).layers, [1024, 4096], a.steps // 2, a.context,
                                                 device, "bf16", variants=("eager", "lab", "graph", "graph_lab"),
                                                 max_reps=8, rounds=2))
                (out / "e2e.json").write_text(json.dumps(res, indent=2) + "\n")
    res["wall_s"] = time.time() - t0
    (out / "e2e.json").write_text(json.dumps(res, indent=2) + "\n")
    md = render(res)
    (out / "e2e.md").write_text(md)
    print(md)
    bad = [(m["model"], c["check"], c["variant"]) for m in res["models"] for c in m["checks"] if not c["ok"]]
    if bad:
        log(f"checks failed: {bad}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
