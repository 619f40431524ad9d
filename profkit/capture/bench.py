"""`profkit bench`: time the variants of an operator across shapes, correctness first.

An operator is a lab workload (`profkit.kernels`, by name) or a user's own, declared the same
way: a module (or .py file) holding a `profkit.kernels.Workload`, named `MODULE:NAME`. For
every shape, each variant's output is checked against the workload's reference first (a
variant that fails is reported, not timed); then the lab's harness (profkit.kernels.timing:
do_bench median, inputs rotated past the L2) times it, and each row gets GB/s and TFLOP/s from
the operator's model, % of the device-to-device copy bandwidth measured in the same run, and
its speed-up over each baseline variant of the same shape. Rows carry GPU, driver, torch,
triton and date and go into the database (`bench` view) and a markdown table.
"""

from __future__ import annotations

import json

from profkit.capture.tune import _device, _need_lab
from profkit.core.errors import BadArgument


def workload(spec: str):
    """A lab workload by name, or MODULE:NAME of a user's Workload."""
    _need_lab()
    from profkit import kernels as lab

    if ":" in spec:
        try:
            return lab.get(spec)
        except KeyError as e:
            raise BadArgument(str(e.args[0])) from None
        except Exception as e:  # the user's module failed to import: its error, one line
            raise BadArgument(f"{spec}: importing it failed: {type(e).__name__}: {e}") from None
    ws = lab.workloads()
    if spec not in ws:
        import difflib

        close = difflib.get_close_matches(spec, list(ws), n=3)
        raise BadArgument(
            f"no workload named {spec!r}"
            + (f"; did you mean {', '.join(close)}?" if close else f"; known: {', '.join(ws)}")
        )
    return ws[spec]


def run(
    spec: str,
    variants: list[str] | None = None,
    shapes: list[str] | None = None,
    dtype: str | None = None,
    quick: bool = False,
    progress=None,
) -> tuple[list[dict], dict]:
    """(rows, copy) for every (shape, variant); `progress(what)` hears each step."""
    _need_lab()  # before anything imports torch: the core install says so in one line
    import torch

    from profkit.kernels.timing import copy_bandwidth, first_call_checked, header, n_copies, rotating, stamp, timer

    w = workload(spec)
    if w.model is None or not w.shapes:
        raise BadArgument(f"{w.op}: a workload needs shapes and a bytes/FLOPs model to be benchmarked")
    device = _device()
    dtype = dtype or w.default_dtype
    names = shapes or list(
        (w.quick if quick and w.quick else w.shapes) if device == "cuda" else (w.selftest or w.shapes)
    )
    table = {**w.shapes, **w.selftest}
    missing = [s for s in names if s not in table]
    if missing:
        raise BadArgument(f"{w.op}: no shape {missing[0]!r}; known: {', '.join(table)}")
    wanted = variants or [v for v in w.variants if v not in w.gpu_only]
    unknown = [v for v in wanted if v not in w.variants]
    if unknown:
        raise BadArgument(f"{w.op}: no variant {unknown[0]!r}; known: {', '.join(w.variants)}")
    info = header(device)
    bench = timer(device)
    copy = copy_bandwidth(device, bench)
    rows = []
    for shape in names:
        p = table[shape]
        state = w.setup(p, dtype, device)
        states = [state] + [w.setup(p, dtype, device) for _ in range(n_copies(state, device) - 1)]
        mdl = w.model(p, dtype)
        for v in wanted:
            if progress:
                progress(f"{w.op}/{v}/{shape}")
            row = {**stamp(info), "op": w.op, "variant": v, "shape": shape, "dtype": dtype, "ok": 0, "speedups": "{}"}
            why = w.available(v)
            if why:
                rows.append({**row, "note": f"skipped: {why}"})
                continue
            fn = w.variants[v]
            try:
                r = first_call_checked(w, v, state, dtype)
            except Exception as e:  # noqa: BLE001 - the variant's own failure: one row that says so
                rows.append(
                    {**row, "note": f"failed: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300]}
                )
                continue
            if r is not None:
                row["rel_err"] = r.rel_err
                if not r.ok:
                    rows.append({**row, "note": f"wrong result, not timed: {r}"})
                    continue
            row["ok"] = 1
            ms = bench(rotating(fn, states))
            row.update(
                ms=ms,
                gbps=mdl["bytes"] / ms / 1e6,
                tflops=mdl["flops"] / ms / 1e9,
                pct_of_copy=100 * mdl["bytes"] / ms / 1e6 / copy["gbps"],
                note=None if r is not None else "no reference: not checked",
            )
            rows.append(row)
        del state, states
        if device == "cuda":
            torch.cuda.empty_cache()
    _speedups(rows, w)
    return rows, {**copy, **stamp(info)}


def _speedups(rows: list[dict], w) -> None:
    """Each timed row's speed-up over every baseline variant timed at the same shape."""
    by_shape: dict[str, dict[str, float]] = {}
    for r in rows:
        if r.get("ms"):
            by_shape.setdefault(r["shape"], {})[r["variant"]] = r["ms"]
    for r in rows:
        if r.get("ms"):
            base = {b: ms / r["ms"] for b, ms in by_shape[r["shape"]].items() if b in w.baselines and b != r["variant"]}
            r["speedups"] = json.dumps(base, sort_keys=True)


def markdown(rows: list[dict], copy: dict) -> str:
    head = (
        f"GPU {copy.get('gpu')}, driver {copy.get('driver')}, torch {copy.get('torch')}, triton {copy.get('triton')}, "
        f"{copy.get('date')}; device-to-device copy {copy['gbps']:,.0f} GB/s measured in the same run."
    )
    if copy.get("gpu") in (None, "cpu"):
        head += " CPU run (TRITON_INTERPRET=1): the checks are real, the times only check the plumbing."
    lines = [
        head,
        "",
        "| op | shape | variant | ms | GB/s | TFLOP/s | % of copy | speed-up vs baselines | check |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        sp = ", ".join(f"{k} {v:.2f}x" for k, v in json.loads(r.get("speedups") or "{}").items())
        num = lambda k, f: "" if r.get(k) is None else format(r[k], f)
        check = "ok" if r["ok"] else (r.get("note") or "failed")
        lines.append(
            f"| {r['op']} | {r['shape']} | {r['variant']} | {num('ms', '.4f')} | {num('gbps', ',.0f')} | "
            f"{num('tflops', ',.2f')} | {num('pct_of_copy', '.0f')} | {sp} | {check.replace('|', '/')} |"
        )
    return "\n".join(lines) + "\n"
