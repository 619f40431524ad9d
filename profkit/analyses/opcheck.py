"""The operator model against Nsight Compute's counts of the same kernels (issue 52).

Two runs of one program: a timeline with recorded shapes (torch.profiler record_shapes, or nsys
with autograd-shapes NVTX) and an ncu report of the same steps. Kernels pair by order: the
report's launches in their order against the timeline's launches of one host thread in start
order, the kernel names agreeing one by one (ncu's NVTX filter holds one thread's ranges, so
a backward on the autograd thread is absent from it). Then, per operator whose kernels all
paired:

- FLOPs: the model's vs ncu's (tensor-pipe ops plus FP32/FP64 add, mul and 2 x fma);
- bytes: the model's reads vs ncu's DRAM reads (the stock kernels' where the model knows they
  move more than the minimum: aten.kernel_traffic), and the model's writes (aten.written) vs
  ncu's DRAM writes.
  ncu replays each kernel with the caches flushed, so its reads are cold, as the model's are;
  but a kernel's output lands in the 50 MB L2 (H100) and reaches DRAM after the kernel ends,
  so ncu's DRAM writes of a kernel whose output fits in L2 fall short of what it wrote;
- labels: the label the shapes give each launch (shape_labels) vs the label its counters give
  in the ncu run (classify), by share of the timeline's GPU time.
"""

from __future__ import annotations

from collections import defaultdict

from profkit.analyses import classify, shape_labels
from profkit.core.errors import BadInput
from profkit.core.metrics import lookup
from profkit.model import perf
from profkit.model.ops import aten, optimizers
from profkit.store.store import Store


def match(names: list[str], sequences: list[list[tuple[int, str]]]) -> list[tuple[int, int]] | None:
    """(index into `names`, launch id) pairs: the first sequence of (launch id, name) in which
    `names` run as one unbroken stretch, name by name; None where none holds them."""
    for seq in sequences:
        mine = [n for _, n in seq]
        for off in range(len(mine) - len(names) + 1):
            if mine[off : off + len(names)] == names:
                return [(i, seq[off + i][0]) for i in range(len(names))]
    return None


def pair(store: Store, timeline_run: str, counters_run: str) -> dict[int, int]:
    """timeline launch id -> counters launch id, by order: the report's launches against the
    timeline's launches of all threads in start order (a report bracketed by cudaProfilerStart/
    Stop), else of one host thread (an NVTX push/pop filter holds one thread's launches)."""
    ncu = store.query("SELECT kernel_id, short_name FROM kernels WHERE run = ? ORDER BY kernel_id", (counters_run,))
    rows = store.query(
        "SELECT kernel_id, short_name, tid FROM kernels WHERE run = ? ORDER BY start_ns, kernel_id", (timeline_run,)
    )
    threads: dict = defaultdict(list)
    for r in rows:
        threads[r["tid"]].append((r["kernel_id"], r["short_name"]))
    everyone = [(r["kernel_id"], r["short_name"]) for r in rows]
    hit = match([r["short_name"] for r in ncu], [everyone, *threads.values()])
    if hit is None:
        raise BadInput(
            counters_run,
            f"its {len(ncu)} kernels do not run in this order in run {timeline_run!r}, on all threads or on one: "
            "not the same program and steps",
        )
    return {k: ncu[i]["kernel_id"] for i, k in hit}


def operators(store: Store, timeline_run: str, counters_run: str) -> list[dict]:
    """One row per operator whose kernels all have counters: the model's numbers and ncu's."""
    paired = pair(store, timeline_run, counters_run)
    counters = store.counters(counters_run)
    ops = shape_labels.model_ops(store, timeline_run)
    by_op: dict[int, list[int]] = defaultdict(list)
    for launch, o in ops.items():
        by_op[o["op_id"]].append(launch)
    out = []
    for op_id, launches in sorted(by_op.items()):
        if not all(k in paired for k in launches):
            continue
        o = ops[launches[0]]
        flops = rd = wr = 0.0
        for k in launches:
            c = counters.get(paired[k]) or {}
            flops += sum(perf.work(c).values())
            rd += lookup(c, "dram_read_bytes") or 0.0
            wr += lookup(c, "dram_write_bytes") or 0.0
        written = read = None
        if o["family"] == "optimizer" and o["min_bytes"]:
            # the lists its kernels' functor writes, of all it touches
            mt = optimizers.multi_tensor(shape_labels._kernels(store, o) or [])
            written = o["min_bytes"] * mt["writes"] / (mt["reads"] + mt["writes"]) if mt else None
        elif o["family"] is not None:
            ins = shape_labels._operands(o)
            written = aten.written(o["op"], ins)
            kt = aten.kernel_traffic(o["op"], ins)
            read = kt[0] if kt else None
        if read is None and written is not None and o["min_bytes"] is not None:
            read = o["min_bytes"] - written
        out.append(
            {
                "op_id": op_id,
                "op": o["op"],
                "family": o["family"],
                "dims": o["input_dims"],
                "kernels": len(launches),
                "gpu_ns": o["gpu_ns"] or 0,
                "model_flops": o["flops"],
                "model_bytes": o["min_bytes"],
                "model_write": written,
                "model_read": read,  # the stock kernels' where the model knows them (aten.kernel_traffic)
                "ncu_flops": flops,
                "ncu_read": rd,
                "ncu_write": wr,
                "note": o["note"],
            }
        )
    return out


def ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a and b else None


def roof_label(work: dict[str, float], nbytes: float, ns: float, ceilings: dict, attained: float) -> str:
    """The label shape_labels' rule gives `work` ({ceiling key: FLOPs}) and `nbytes` of DRAM
    traffic done in `ns`: the roof it is nearest, when at `attained` of it or more, else latency."""
    t_mem = nbytes / ceilings["dram"] * 1e9
    t_flop = {k: v / (ceilings.get(k) or ceilings["fp32"]) * 1e9 for k, v in work.items()}
    top = max(t_flop, key=lambda k: t_flop[k]) if t_flop else None
    t_top = t_flop[top] if top else 0.0
    if max(t_mem, t_top) < attained * ns:
        return "latency"
    if t_mem >= t_top:
        return "dram"
    return "tensor_core" if top and top.endswith("_tensor") else "compute"


def labels(store: Store, timeline_run: str, counters_run: str, attained: float = shape_labels.ATTAINED) -> list[dict]:
    """Per paired launch, weighted by its timeline time: the label from shapes (shape_labels at
    `attained`), classify's label from its counters, and the same roofline rule as the shapes'
    applied to the counted FLOPs, DRAM bytes and ncu's duration (a report without SM
    throughput leaves classify unable to tell compute from latency; the counted roofline still
    places the launch)."""
    paired = pair(store, timeline_run, counters_run)
    keep = shape_labels.ATTAINED
    shape_labels.ATTAINED = attained
    try:
        shaped = {r["kernel_id"]: r for r in classify.label_rows(store, timeline_run)}
    finally:
        shape_labels.ATTAINED = keep
    counted = {r["kernel_id"]: r for r in classify.label_rows(store, counters_run)}
    counters = store.counters(counters_run)
    ceilings, _ = shape_labels._peaks(store, timeline_run)
    ops = shape_labels.model_ops(store, timeline_run)
    dur = {
        r["kernel_id"]: r["duration_ns"] or 0
        for r in store.query("SELECT kernel_id, duration_ns FROM kernels WHERE run = ?", (timeline_run,))
    }
    out = []
    for k, n in paired.items():
        if k not in shaped or n not in counted:
            continue
        c = counters.get(n) or {}
        o = ops.get(k) or {}
        ns = lookup(c, "duration") or 0.0
        nbytes = (lookup(c, "dram_read_bytes") or 0.0) + (lookup(c, "dram_write_bytes") or 0.0)
        roof = roof_label(perf.work(c), nbytes, ns, ceilings, shape_labels.ATTAINED) if ceilings and ns else None
        out.append(
            {
                "kernel_id": k,
                "op": o.get("op"),
                "shapes": shaped[k]["label"],
                "counters": counted[n]["label"],
                "counted_roofline": roof,
                "gpu_ns": dur.get(k, 0),
                "shapes_reason": shaped[k]["reason"],
                "counters_reason": counted[n]["reason"],
            }
        )
    return out


# the counted roofline places a launch against its roofs only: a short launch the timeline calls
# `launch_overhead` is, to it, one near no roof, its `latency`
SAME = {"launch_overhead": "latency"}


def agreement(rows: list[dict], against: str = "counted_roofline", strict: bool = False) -> float:
    """The share of the paired launches' GPU time where the label from shapes is the one the
    counters give (`against`: counted_roofline or counters, classify's); `launch_overhead` on the
    shapes' side counts as `latency` against the counted roofline unless `strict`."""
    total = sum(r["gpu_ns"] for r in rows)

    def same(r: dict) -> bool:
        mine = r["shapes"] if strict or against != "counted_roofline" else SAME.get(r["shapes"], r["shapes"])
        return mine == r[against]

    return sum(r["gpu_ns"] for r in rows if same(r)) / total if total else 0.0
