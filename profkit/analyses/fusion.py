"""The fusion floor of a range: what one kernel doing all of the range's operators must move.

A range's kernels today each read their inputs from DRAM and write their outputs back; one
fused kernel reads only the tensors that enter the range from outside and writes only those
that leave it. From the operators' recorded shapes (the ops table): walking the operators in
launch order, an input is internal when an earlier operator of the range produced a tensor of
its size and dtype (profkit.model.ops.aten.output_of; by element count, so a view or reshape
of it still matches), else external (read once, however many
operators read it); an output is external when no later operator reads it, or when it is the
last operator's. The floor is those bytes at the DRAM bandwidth, or the operators' FLOPs at the
GPU's peaks where that is longer.

Tensors are matched by element count and dtype (the trace records no tensor identity): a
tensor from outside as large as an intermediate counts as internal (a floor too low, never too
high).
"""

from __future__ import annotations

import json

from profkit.model import gpus
from profkit.model.ops import aten
from profkit.store import ops_table
from profkit.store.store import Store

TENSOR = ("matmul", "conv", "attention")
# operators whose first argument is only written (an out= destination)
WRITE_ONLY_FIRST = {"copy_", "_copy_from", "fill_", "zero_", "normal_", "uniform_", "random_", "bernoulli_"}


def ops_of(store: Store, run: str) -> dict[int, dict]:
    """launch id -> its operator (the ops table), {} for a run without shapes."""
    try:
        return {r["launch_id"]: r for r in store.query(ops_table.LAUNCH_OPS, (run,))}
    except Exception:  # noqa: BLE001 - a database of an older schema: no shapes, no fusion floor
        return {}


def _operands(r: dict) -> list[aten.Operand]:
    dims, types = json.loads(r["input_dims"] or "null"), json.loads(r["input_types"] or "null")
    if types is None and dims:  # autograd-shapes NVTX: no dtypes (the ops view's note says bf16 assumed)
        types = ["c10::BFloat16" if isinstance(d, list) and d else "" for d in dims]
    return aten.operands(dims, types, json.loads(r["concrete"] or "null"))


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


def floor(
    call: list[dict], ops: dict[int, dict], bw: float | None, gpu: str | None, measured: list[dict] | None = None
) -> tuple[float, str, float] | None:
    """(floor ns, how, bytes) of one call of a range fused into one kernel, from its operators'
    shapes; None where a kernel of the call has no operator with shapes, or only one operator."""
    seen, seq = set(), []
    for k in call:
        o = ops.get(k["kernel_id"])
        if o is None or not o["input_dims"]:
            return None
        if o["op_id"] not in seen:
            seen.add(o["op_id"])
            seq.append(o)
    if len(seq) < 2:
        return None
    parsed = [(o["op"], _operands(o)) for o in seq]
    if any(aten.estimate(op, ins)[0] is None for op, ins in parsed):
        return None  # an operator the model cannot size: its tensors are not known
    b_in, b_out, _ = external_bytes(parsed)
    g = gpus.by_name(gpu)
    how_bw = ""
    if bw is None and g and g.ceilings.get("dram"):
        bw, how_bw = g.ceilings["dram"], f"{g.name} datasheet DRAM {g.ceilings['dram'] / 1e12:.2f} TB/s"
    elif bw is not None:
        how_bw = f"{bw / 1e12:.2f} TB/s"
    if not bw:
        return None
    t_bytes = (b_in + b_out) / bw * 1e9
    t_flops = 0.0
    for op, ins in parsed:
        e, _ = aten.estimate(op, ins)
        if e is None or not g:
            continue
        key = f"{e.dtype}_tensor" if e.family in TENSOR and e.dtype in ("bf16", "fp16", "fp8") else "fp32"
        peak = next(
            (p["value"] for p in measured or () if p["ceiling"] == key and p["gpu"] == gpu), None
        ) or g.ceilings.get(key)
        if peak:
            t_flops += e.flops / peak * 1e9
    names = " -> ".join(o["op"].removeprefix("aten::") for o in seq[:6]) + (" ..." if len(seq) > 6 else "")
    how = (
        f"{len(seq)} operators fused ({names}): {(b_in + b_out) / 1e6:,.2f} MB from outside and out "
        f"({b_in / 1e6:,.2f} in, {b_out / 1e6:,.2f} out; from shapes) at {how_bw}"
    )
    if t_flops > t_bytes:
        return t_flops, f"{how}; their FLOPs at the peaks take longer: {t_flops / 1e3:,.1f} us", b_in + b_out
    return t_bytes, how, b_in + b_out
