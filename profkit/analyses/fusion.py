"""The fusion floor of a range: what the range's kernels must move once fused.

A range's kernels today each read their inputs from DRAM and write their outputs back; one
fused kernel reads only the tensors that enter the range from outside and writes only those
that leave it. From the operators' recorded shapes (the ops table): walking the operators in
launch order, an input is internal when an earlier operator of the range produced a tensor of
its size and dtype (profkit.model.ops.aten.output_of; by element count, so a view or reshape
of it still matches), else external (read once, however many
operators read it); an output is external when no later operator reads it, or when it is the
last operator's. The floor is those bytes at the DRAM bandwidth, or the operators' FLOPs at the
GPU's peaks where that is longer. A GEMM, convolution or attention splits the range: it runs in a
library kernel that fuses with nothing and keeps its own measured time (floor()).

Where the trace records tensor identity (emit_nvtx's op ids and each input's producing op:
`profkit capture --torch-ranges`, nsys --pytorch=autograd-shapes-nvtx), an input is internal when
its producer is an operator of the call (or a wrapper or view between them: ids run in launch
order), and an output leaves the call when an operator after it reads it (the next block reading
the residual stream) or it is the last operator's. Elsewhere tensors are matched by element
count and dtype: a tensor from outside as large as an intermediate counts as internal, and a
tensor the caller reads later is not seen. Both err the same way: a floor too low, never too high.
"""

from __future__ import annotations

import bisect
import json

from profkit.model import gpus
from profkit.model.ops import aten
from profkit.store import ops_table
from profkit.store.store import Store

TENSOR = ("matmul", "conv", "attention")
# operators whose first argument is only written (an out= destination)
WRITE_ONLY_FIRST = {"copy_", "_copy_from", "fill_", "zero_", "normal_", "uniform_", "random_", "bernoulli_"}


class Ops(dict):
    """launch id -> its operator (the ops table), with the run's tensor identity where recorded:
    `ids` every operator's torch op id, sorted; `last_reader` op id -> the largest id reading it."""

    ids: list[int]
    last_reader: dict[int, int]


def ops_of(store: Store, run: str) -> Ops:
    """The run's operators by launch; empty for a run without shapes."""
    out = Ops()
    out.ids, out.last_reader = [], {}
    try:
        out.update({r["launch_id"]: r for r in store.query(ops_table.LAUNCH_OPS, (run,))})
        rows = store.query(
            "SELECT torch_op_id, input_op_ids FROM op_row WHERE run = ? AND torch_op_id IS NOT NULL", (run,)
        )
    except Exception:  # noqa: BLE001 - a database of an older schema: no shapes, no fusion floor
        return Ops()
    for r in rows:
        me = r["torch_op_id"]
        out.ids.append(me)
        for p, _ in json.loads(r["input_op_ids"] or "[]"):
            if p > 0 and out.last_reader.get(p, 0) < me:
                out.last_reader[p] = me
    out.ids.sort()
    return out


def _operands(r: dict) -> list[aten.Operand]:
    dims, types = json.loads(r["input_dims"] or "null"), json.loads(r["input_types"] or "null")
    if types is None and dims:  # autograd-shapes NVTX: no dtypes (the ops view's note says bf16 assumed)
        types = ["c10::BFloat16" if isinstance(d, list) and d else "" for d in dims]
    return aten.operands(dims, types, json.loads(r["concrete"] or "null"), json.loads(r.get("input_strides") or "null"))


def external_bytes(ops: list[tuple[str, list[aten.Operand]]]) -> tuple[float, float, str]:
    """(bytes in, bytes out, how) of one call's operators in launch order."""
    produced: dict[tuple, int] = {}  # (elements, dtype size) -> index of the op that produced it
    outs: list[aten.Operand | None] = []
    read_later: set[int] = set()
    seen_in: set[tuple] = set()
    b_in = 0.0
    for i, (op, ins) in enumerate(ops):
        mine: set[tuple] = set()  # one operator's inputs are distinct tensors; a later op's may repeat one
        for j, o in enumerate(ins):
            if j == 0 and op.removeprefix("aten::") in WRITE_ONLY_FIRST:
                continue  # the destination: written, not read
            tensors = list(o.items) if o.items else ([o] if o.tensor else [])
            for x in tensors:
                key = (x.numel, x.esize or 2)
                if key in produced:
                    read_later.add(produced[key])
                elif key not in seen_in:
                    mine.add(key)
                    b_in += x.numel * (x.esize or 2)
        seen_in |= mine
        out = aten.output_of(op, ins)
        outs.append(out)
        if out is not None and out.dims is not None:
            produced[(out.numel, out.esize or 2)] = i
    b_out = sum(o.nbytes for i, o in enumerate(outs) if o is not None and (i not in read_later or i == len(outs) - 1))
    return b_in, float(b_out), f"{len(ops)} operators"


def identity_bytes(
    ops: list[tuple[str, list[aten.Operand]]], rows: list[dict], run_ops: dict[int, dict]
) -> tuple[float, float] | None:
    """(bytes in, bytes out) of one call's operators (in launch order, `rows` their op rows) from
    the recorded tensor identity; None where an operator of the call lacks it."""
    ids: list[int] = [r.get("torch_op_id") for r in rows]  # type: ignore[misc]
    producers = [json.loads(r.get("input_op_ids") or "null") for r in rows]
    every = getattr(run_ops, "ids", None)
    if not every or any(i is None for i in ids) or any(p is None for p in producers):
        return None
    if any(len(p) != len(ins) for p, (_, ins) in zip(producers, ops)):
        return None
    first = bisect.bisect_left(every, min(ids))
    lo, hi = (every[first - 1] + 1 if first else 0), max(ids)
    last_reader: dict[int, int] = getattr(run_ops, "last_reader", {})
    b_in = b_out = 0.0
    read: set[tuple[int, int]] = set()
    before = lo - 1
    for n, ((op, ins), prod, me) in enumerate(zip(ops, producers, ids)):
        for j, (o, (p, nr)) in enumerate(zip(ins, prod)):
            if j == 0 and op.removeprefix("aten::") in WRITE_ONLY_FIRST:
                continue
            tensors = list(o.items) if o.items else ([o] if o.tensor else [])
            if not tensors or lo <= p <= hi:
                continue
            if p > 0 and (p, nr) in read:
                continue
            read.add((p, nr))
            b_in += sum(x.numel * (x.esize or 2) for x in tensors)
        out = aten.output_of(op, ins)
        # its output carries its own id or a wrapper's (aten::layer_norm around native_layer_norm)
        leaves = n == len(ops) - 1 or any(last_reader.get(i, 0) > hi for i in range(before + 1, me + 1))
        if out is not None and leaves:
            b_out += out.nbytes
        before = me
    return b_in, b_out


def floor(
    call: list[dict], ops: dict[int, dict], bw: float | None, gpu: str | None, measured: list[dict] | None = None
) -> tuple[float, str, float] | None:
    """(floor ns, how, bytes) of one call of a range fused as far as a compiler fuses it, from its
    operators' shapes; None where a kernel of the call has no operator with shapes, or only one
    operator.

    A GEMM, convolution or attention runs in a library kernel (cuBLAS, cuDNN, flash) that takes
    no arbitrary prologue or epilogue: it is a fusion boundary, its tensors go through DRAM, and
    fusing the operators around it does not make it faster, so it keeps its measured time (its
    FLOPs at the peak where the call has no durations). Each run of other operators between such
    boundaries is one fused kernel: its external inputs and outputs at the DRAM bandwidth, or its
    FLOPs at the peaks where longer."""
    seen: dict[int, int] = {}
    seq: list[dict] = []
    took: list[float] = []
    for k in call:
        o = ops.get(k["kernel_id"])
        if o is None or not o["input_dims"]:
            return None
        if o["op_id"] not in seen:
            seen[o["op_id"]] = len(seq)
            seq.append(o)
            took.append(0.0)
        took[seen[o["op_id"]]] += float(k.get("duration_ns") or 0)
    if len(seq) < 2:
        return None
    parsed = [(o["op"], _operands(o)) for o in seq]
    est = [e for op, ins in parsed if (e := aten.estimate(op, ins)[0]) is not None]
    if len(est) < len(parsed):
        return None  # an operator the model cannot size: its tensors are not known
    g = gpus.by_name(gpu)
    how_bw = ""
    if bw is None and g and g.ceilings.get("dram"):
        bw, how_bw = g.ceilings["dram"], f"{g.name} datasheet DRAM {g.ceilings['dram'] / 1e12:.2f} TB/s"
    elif bw is not None:
        how_bw = f"{bw / 1e12:.2f} TB/s"
    if not bw:
        return None

    def flop_ns(e) -> float:
        if not g:
            return 0.0
        key = f"{e.dtype}_tensor" if e.family in TENSOR and e.dtype in ("bf16", "fp16", "fp8") else "fp32"
        peak = next(
            (p["value"] for p in measured or () if p["ceiling"] == key and p["gpu"] == gpu), None
        ) or g.ceilings.get(key)
        return e.flops / peak * 1e9 if peak else 0.0

    total = moved = 0.0
    parts: list[str] = []
    run: list[int] = []

    def close_run() -> None:
        nonlocal total, moved
        if not run:
            return
        known = identity_bytes([parsed[i] for i in run], [seq[i] for i in run], ops)
        b_in, b_out = known if known is not None else external_bytes([parsed[i] for i in run])[:2]
        basis = "tensor identity" if known is not None else "shapes"
        t_b, t_f = (b_in + b_out) / bw * 1e9, sum(flop_ns(est[i]) for i in run)
        total += max(t_b, t_f)
        moved += b_in + b_out
        names = " -> ".join(seq[i]["op"].removeprefix("aten::") for i in run[:6]) + (" ..." if len(run) > 6 else "")
        parts.append(
            f"{len(run)} operators fused ({names}): {(b_in + b_out) / 1e6:,.2f} MB from outside and out "
            f"({b_in / 1e6:,.2f} in, {b_out / 1e6:,.2f} out; from {basis})"
            + (f", their FLOPs at the peaks take longer: {t_f / 1e3:,.1f} us" if t_f > t_b else "")
        )
        run.clear()

    for i, e in enumerate(est):
        if e.family in TENSOR:
            close_run()
            t = took[i] or flop_ns(e)
            total += t
            moved += e.bytes
            name = seq[i]["op"].removeprefix("aten::")
            parts.append(
                f"{name} as a library kernel: {t / 1e3:,.1f} us ({'measured' if took[i] else 'FLOPs at peak'})"
            )
        else:
            run.append(i)
    close_run()
    return total, "; ".join(parts) + f" at {how_bw}", moved
