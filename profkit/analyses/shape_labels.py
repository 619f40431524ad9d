"""Labels from the operator model where a launch has no counters (issue 52).

A timeline (torch.profiler with record_shapes, nsys with autograd-shapes NVTX) says which
operator launched each kernel and with which shapes; the operator model (profkit/model/ops)
turns those into FLOPs and minimum DRAM bytes. With the measured GPU time of the operator's
kernels and the GPU's peaks (the report's, else the known-GPU table) that is a roofline point:

- intensity = FLOPs / bytes against the ridge of the precision it computes in says which roof
  bounds it (DRAM below the ridge; tensor cores or the FP32 pipes above it);
- attained = the roof's time for that work / the measured time: at or above ATTAINED of the
  roof the label is that roof's (dram, tensor_core, compute), the rule counters use (60 %);
  below it, `latency`: neither roof is near, whatever the kernel does with its time.

The minimum bytes are a floor: a kernel that re-reads moves more, so a DRAM-bound kernel's
attained share is a lower bound (a label of `latency` may be a DRAM-bound kernel that
over-reads; the reason gives the numbers). An operator whose inputs the model cannot read keeps
its `unknown`, with the model's why added.
"""

from __future__ import annotations

import json
from bisect import bisect_left
from math import prod

import numpy as np

from profkit.core import columns
from profkit.model import families, gpus
from profkit.model.ops import aten
from profkit.parsers._ops import GRAD_OP
from profkit.store import ops_table
from profkit.store.store import Store

ATTAINED = 0.6  # the share of a roof that counts as bound by it (classify's busy threshold)
TENSOR_FAMILIES = ("matmul", "conv", "attention")


def _ceiling(family: str, precision: str | None) -> str:
    """The compute ceiling an operator's arithmetic runs on (profkit.model.gpus keys)."""
    if family in TENSOR_FAMILIES and precision in ("bf16", "fp16", "fp8"):
        return f"{precision}_tensor"
    if family in TENSOR_FAMILIES and precision == "fp64":
        return "fp64"
    return "fp32"


def model_ops(store: Store, run: str, write: bool = False) -> dict[int, dict]:
    """launch id -> its operator with the model's numbers (computed where not stored yet; stored
    with `write`, the explicit classify step's, where the store can write)."""
    rows = store.query(ops_table.LAUNCH_OPS, (run,))
    out: dict[int, dict] = {}
    fresh: dict[int, tuple] = {}
    steps = _Steps(store, run)
    for r in rows:
        r = dict(r)
        if r["family"] is None and r["note"] is None:
            if r["op_id"] not in fresh:
                fresh[r["op_id"]] = _estimate(r, _kernels(store, r), steps.before(r))
            fam, flops, nbytes, prec, note = fresh[r["op_id"]]
            r.update(family=fam, flops=flops, min_bytes=nbytes, precision=prec, note=note)
        out[r["launch_id"]] = r
    if fresh and write:
        store.set_op_model([(*v, k) for k, v in fresh.items()])
    for op_id in {r["op_id"] for r in out.values() if r["family"] == "optimizer" and (r["kernels"] or 0) > 1}:
        for launch, (blocks, total, ns) in _chunks(store, op_id).items():
            if launch in out:
                out[launch].update(launch_blocks=blocks, op_blocks=total, launch_ns=ns)
    return out


def _chunks(store: Store, op_id: int) -> dict[int, tuple[int, int, int]]:
    """launch id -> (its blocks, the operator's blocks, its duration) where every launch of the
    operator is a multi_tensor_apply kernel: each block does one chunk of the lists, so a launch
    does its blocks' share of the operator's work, and is labelled on that share ({} otherwise)."""
    rows = store.query(
        "SELECT k.kernel_id, k.kernel_name, k.grid_x, k.grid_y, k.grid_z, k.duration_ns FROM op_launch x"
        " JOIN kernels k ON k.kernel_id = x.launch_id WHERE x.op_id = ?",
        (op_id,),
    )
    if not rows or not all("multi_tensor_apply_kernel" in (k["kernel_name"] or "") for k in rows):
        return {}
    blocks = {k["kernel_id"]: (k["grid_x"] or 0) * (k["grid_y"] or 1) * (k["grid_z"] or 1) for k in rows}
    total = sum(blocks.values())
    if total <= 0:
        return {}
    return {k["kernel_id"]: (blocks[k["kernel_id"]], total, k["duration_ns"] or 0) for k in rows}


def _load(text):
    try:
        return json.loads(text) if text else None
    except ValueError:
        return None


# autograd-shapes NVTX ranges carry sizes, no dtypes: the element size is an assumption then
NVTX_DTYPE = "c10::BFloat16"
NVTX_NOTE = "dtypes not in the NVTX payload: bf16 assumed"


def _operands(r: dict) -> list[aten.Operand]:
    dims, types = _load(r["input_dims"]), _load(r["input_types"])
    if types is None and dims:
        types = [NVTX_DTYPE if isinstance(d, list) and d else "" for d in dims]
    return aten.operands(dims, types, _load(r["concrete"]), _load(r.get("input_strides")))


def _kernels(store: Store, r: dict) -> list[tuple[str, int]] | None:
    """(kernel name, grid blocks) of an optimizer operator's launches: its tensor lists' sizes
    where the trace has none (profkit/model/ops/optimizers.py); None for other operators."""
    if aten.family_of(r["op"]) != "optimizer":
        return None
    rows = store.query(
        "SELECT k.kernel_name, k.grid_x, k.grid_y, k.grid_z FROM op_launch x JOIN kernels k ON k.kernel_id ="
        " x.launch_id WHERE x.op_id = ? ORDER BY k.start_ns",
        (r["op_id"],),
    )
    return [(k["kernel_name"] or "", (k["grid_x"] or 0) * (k["grid_y"] or 1) * (k["grid_z"] or 1)) for k in rows]


class _Steps:
    """A run's accumulated gradients and optimizer ops in host order, read once: the gradients
    of the backward before each optimizer operator (`before`)."""

    def __init__(self, store: Store, run: str):
        self.store, self.run = store, run
        self.rows: dict[tuple, list[tuple[int, str, str | None]]] | None = None
        self.me: dict[int, tuple] = {}

    def _load(self) -> dict[tuple, list[tuple[int, str, str | None]]]:
        if self.rows is None:
            self.rows = {}
            for o in self.store.query(
                "SELECT id, op, input_dims, start_ns, pid, rank FROM op_row WHERE run = ?"
                " AND (op = ? OR op LIKE 'aten::\\_f%' ESCAPE '\\') ORDER BY start_ns",
                (self.run, GRAD_OP),
            ):
                if o["op"] != GRAD_OP and aten.family_of(o["op"]) != "optimizer":
                    continue  # _fused_rms_norm, _fft_...: not an optimizer step
                key = (o["pid"], o["rank"])
                self.rows.setdefault(key, []).append((o["start_ns"] or 0, o["op"], o["input_dims"]))
                self.me[o["id"]] = (key, o["start_ns"] or 0)
        return self.rows

    def before(self, r: dict) -> list[int] | None:
        """Element counts of the gradients of the backward before an optimizer operator: the
        AccumulateGrad ops of its process after the previous step's optimizer ops, one per
        parameter (None for other operators)."""
        if aten.family_of(r["op"]) != "optimizer":
            return None
        rows = self._load()
        if r["op_id"] not in self.me:
            return None
        key, start = self.me[r["op_id"]]
        seq = rows.get(key, [])
        grads: list[int] = []
        for t, op, dims_text in reversed(seq[: bisect_left(seq, (start,))]):
            if op != GRAD_OP:
                if grads:
                    break  # the previous step's optimizer: the backward before this one ends here
                continue  # this step's earlier optimizer ops
            dims = _load(dims_text)
            if not (isinstance(dims, list) and dims and isinstance(dims[0], list)):
                return None
            grads.append(prod(int(d) for d in dims[0]))
        return grads


def _estimate(r: dict, kernels: list[tuple[str, int]] | None = None, grads: list[int] | None = None) -> tuple:
    op = r["op"]
    if op.startswith("nccl:"):
        dims, types, conc = _load(r["input_dims"]) or [[0]], _load(r["input_types"]) or [None], _load(r["concrete"])
        try:
            ranks = int((conc or ["", "0"])[1])
        except (ValueError, IndexError):
            ranks = 0
        e = aten.collective(op, int(dims[0][0]), types[0], ranks) if dims and dims[0] else None
        if e is None:
            return None, None, None, None, f"{op}: no group size or message size recorded"
        return e.family, e.flops, e.bytes, e.dtype, e.note
    e, why = aten.estimate(op, _operands(r), kernels, grads)
    if e is None:
        return None, None, None, None, why
    note = "; ".join(x for x in (e.note, NVTX_NOTE if r["input_types"] is None else "") if x)
    return e.family, e.flops, e.bytes, e.dtype, note


def _peaks(store: Store, run: str) -> tuple[dict | None, str]:
    """The run's GPU's ceilings (byte/s, FLOP/s) and whose they are; the report's where it carries
    them is the counters' business: a run without counters has the known-GPU table's."""
    row = store.query("SELECT gpu_name, meta FROM run WHERE run = ?", (run,))
    name = row[0]["gpu_name"] if row else None
    meta = _load(row[0]["meta"]) if row else None
    cc = (meta or {}).get("cc") or (meta or {}).get("compute_capability")
    cands, found = gpus.candidates(name, cc, (meta or {}).get("sm_count"))
    if not cands:
        return None, f"no known peaks for GPU {name or 'unnamed'} (profkit ingest --gpu NAME)"
    g = cands[0]
    return g.ceilings, f"{g.name} datasheet peaks ({found})"


NO_OP = (
    "; from shapes: no operator with recorded shapes holds its launch "
    "(a graph replay, a custom op without shapes, or a launch outside any op)"
)


def has_shapes(store: Store, run: str) -> bool:
    """Whether any launch of the run has an operator with recorded shapes (else relabel labels
    every launch from its kernel family)."""
    q = "SELECT 1 FROM op_launch l JOIN op_row o ON o.id = l.op_id WHERE o.run = ? LIMIT 1"
    return store.conn.execute(q, (run,)).fetchone() is not None


def relabel(store: Store, run: str, rows: list[dict], counted) -> list[dict]:
    """Rows of label_rows whose launch has no counters (not in `counted`) and is `unknown` get the
    operator model's label, else their kernel family's (family_labels); the others are returned
    as they were."""
    todo = [
        r for r in rows if r["label"] == "unknown" and r["kernel_id"] not in counted and r.get("sampled_from") is None
    ]
    if not todo:
        return rows
    ops = model_ops(store, run)
    ceilings, whose = _peaks(store, run) if ops else (None, "")
    left = []
    for r in todo:
        o = ops.get(r["kernel_id"])
        if o is None:
            r["reason"] = f"{r['reason']}{NO_OP}"
            left.append(r)
            continue
        label, reason, ev = label_of(o, ceilings, whose)
        if label is None:
            r["reason"] = f"{r['reason']}; from shapes: {reason}"
            left.append(r)
            continue
        evidence = _load(r["evidence"]) or {}
        evidence.update({"rule": "shapes", "shapes": ev})
        r.update(label=label, reason=reason, evidence=json.dumps(evidence, sort_keys=True))
    if left:
        family_labels(store, run, left)
    return rows


# the counter rule's launch-overhead bounds (classify RULES launch_overhead: tiny_duration_ns)
TINY_NS = 5_000
FAMILY_CITATION = (
    "A guess from who wrote the kernel (profkit.model.families.bound), not a measurement: checked "
    "against the counters of the same kernels in benchmarks/results/shape_labels.md."
)


def gpus_by_file(store: Store, run: str) -> dict[int, str]:
    """{report file id: the GPU it names} of a run whose reports name more than one GPU model
    (ranks of one job on an H100 and an A100); {} when they name one or none."""
    rows = store.conn.execute(
        "SELECT id, json_extract(facts, '$.gpu_name') FROM report_file WHERE run = ? AND json_valid(facts)", (run,)
    ).fetchall()
    named = {fid: g for fid, g in rows if isinstance(g, str) and g}
    return named if len(set(named.values())) > 1 else {}


def family_labels(store: Store, run: str, rows: list[dict]) -> None:
    """Label `unknown` rows without counters or shapes from the timeline and the kernel family:

    - a kernel under 5 us over a grid smaller than the SM count is `launch_overhead` (the counter
      rule's LaunchStatistics test, its grid read from the timeline);
    - else the family's label (profkit.model.families.bound): memory-bound families `dram`, NCCL
      and custom all-reduce `communication`, GEMM/convolution/attention kernels `tensor_core` (or
      `compute` for FP32 SIMT ones) when they ran long, `latency` when short. A family that says
      nothing (user Triton, CUB, unrecognised names) leaves the launch `unknown`.

    The reason starts "from the kernel family:" and evidence `rule` is `family` (or
    `launch_overhead` with `timeline_grid`), so a guess is told from a measurement."""
    run_gpu = _gpu(store, run)
    # ranks of one job on different GPU models: a launch is labelled on its own report's GPU
    by_file: dict[int, tuple[gpus.Gpu | None, str]] = {}
    for fid, gname in gpus_by_file(store, run).items():
        cands, how = gpus.candidates(gname, None)
        by_file[fid] = (cands[0] if cands else None, how)
    facts = {
        i: (name, dur, gx, gy, gz, fid)
        for i, name, dur, gx, gy, gz, fid in store.conn.execute(
            "SELECT r.id, n.name, r.duration_ns, r.grid_x, r.grid_y, r.grid_z, r.file_id FROM launch_row r"
            " JOIN launch_name n ON n.id = r.name_id WHERE r.id IN (SELECT value FROM json_each(?))",
            (json.dumps([r["kernel_id"] for r in rows]),),
        )
    }
    fam_of: dict[str, tuple[str, str]] = {}
    made: dict[tuple, tuple[str, str]] = {}
    for r in rows:
        name, dur, gx, gy, gz, fid = facts.get(r["kernel_id"], (r["kernel_name"], None, None, None, None, None))
        if name not in fam_of:
            fam_of[name] = families.explain(name)
        grid = (gx or 1) * (gy or 1) * (gz or 1) if gx else None
        gpu, found = by_file.get(fid, run_gpu)
        label, reason, ev = family_label(fam_of[name], name, dur, grid, gpu, found)
        if label is None:
            r["reason"] = f"{r['reason']}; from the kernel family: {reason}"
            continue
        # what `ev` holds: the family's facts (per name), or the grid on a GPU (launch overhead)
        same = (ev["rule"], name if ev["rule"] == "family" else (grid, found))
        r.update(label=label, reason=reason, evidence=_with(r["evidence"], ev, same, made))


def family_groups(
    store: Store, run: str, names: dict[int, str], name_id: np.ndarray, dur: np.ndarray, grid: np.ndarray, null: int
) -> tuple[np.ndarray, list[tuple[str | None, str, dict, tuple]]]:
    """family_labels of launches given as columns (name id, duration, grid blocks; `null` where
    none), computed once per (name, duration) or, where the grid decides, (duration, grid): the
    group of each launch and each group's (label, reason, evidence added, what makes that
    evidence the same: _with's `same`)."""
    gpu, found = _gpu(store, run)
    sms = gpu.sms if gpu is not None and gpu.sms else 0
    tiny = (dur != null) & (dur < TINY_NS) & (grid != null) & (grid < sms) & (sms > 0)
    key = columns.row_key([tiny.astype(np.int64), np.where(tiny, 0, name_id), dur, np.where(tiny, grid, 0)])
    _, first, inv = np.unique(key, return_index=True, return_inverse=True)
    fam_of: dict[int, tuple[str, str]] = {}
    groups: list[tuple[str | None, str, dict, tuple]] = []
    for n, d, g in zip(name_id[first].tolist(), dur[first].tolist(), grid[first].tolist()):
        name = names[n]
        if n not in fam_of:
            fam_of[n] = families.explain(name)
        grid_n = None if g == null else g
        label, reason, ev = family_label(fam_of[n], name, None if d == null else d, grid_n, gpu, found)
        groups.append((label, reason, ev, (ev.get("rule"), name if ev.get("rule") == "family" else grid_n)))
    return inv.reshape(-1), groups


# a no-counter launch's evidence differs from its siblings' by its timeline facts only (a flat
# object): the evidence with the family's added is made once per shape and name, then cut there
_TIMELINE = '"timeline": '


def _with(text: str, ev: dict, same: tuple, made: dict) -> str:
    """A launch's evidence JSON with `ev`'s keys added (sorted keys, as classify writes it);
    `same`: what makes `ev` the same for launches of the same evidence otherwise."""
    at = text.find(_TIMELINE)
    end = -1
    if at >= 0:
        at += len(_TIMELINE)
        end = at + 4 if text.startswith("null", at) else text.find("}", at) + 1
    if end <= at:
        whole = _load(text) or {}
        whole.update(ev)
        return json.dumps(whole, sort_keys=True)
    key = (text[:at], text[end:], same)
    parts = made.get(key)
    if parts is None:
        whole = _load(text[:at] + "null" + text[end:]) or {}
        whole.update(ev)
        out = json.dumps(whole, sort_keys=True)
        cut = out.index(_TIMELINE + "null") + len(_TIMELINE)
        parts = made[key] = (out[:cut], out[cut + 4 :])
    return parts[0] + text[at:end] + parts[1]


def family_label(
    family: tuple[str, str], name: str | None, dur: float | None, grid: int | None, gpu: gpus.Gpu | None, found: str
) -> tuple[str | None, str, dict]:
    """(label, reason, evidence) of one launch from its timeline facts and its kernel family
    ((key, why the name is that family's)); label None: neither says."""
    if dur is not None and dur < TINY_NS and grid is not None and gpu is not None and gpu.sms and grid < gpu.sms:
        reason = (
            f"{dur / 1e3:.1f} us kernel over {grid} blocks (< {gpu.sms} SMs of the {gpu.name}): "
            "launch overhead, from the timeline's grid (no counters)"
        )
        ev = {"grid": grid, "sm_count": gpu.sms, "gpu": found}
        return "launch_overhead", reason, {"rule": "launch_overhead", "timeline_grid": ev}
    key, named = family
    label, why = families.bound(key, name, dur, gpu.cc if gpu is not None else None)
    if label is None:
        return None, why, {}
    ev = {
        "family": key,
        "title": families.get(key).title,
        "named_by": named,
        "basis": "kernel name and timeline duration (evidence timeline): no counters, no shapes",
        "citation": FAMILY_CITATION,
    }
    reason = f"from the kernel family: {why} (no counters or shapes: a guess from the name)"
    return label, reason, {"rule": "family", "family": ev}


def _gpu(store: Store, run: str) -> tuple[gpus.Gpu | None, str]:
    """The run's GPU row of the known-GPU table (its first candidate) and how it was found."""
    row = store.query("SELECT gpu_name, meta FROM run WHERE run = ?", (run,))
    name = row[0]["gpu_name"] if row else None
    meta = _load(row[0]["meta"]) if row else None
    cc = (meta or {}).get("cc") or (meta or {}).get("compute_capability")
    cands, found = gpus.candidates(name, cc, (meta or {}).get("sm_count"))
    return (cands[0] if cands else None), found


def label_of(o: dict, ceilings: dict | None, whose: str) -> tuple[str | None, str, dict]:
    """(label, reason, evidence) of one operator's kernels from the model's numbers."""
    what = aten.describe(o["op"], _operands(o)) if not o["op"].startswith("nccl:") else o["op"]
    if o["family"] is None or o["flops"] is None:
        return None, o["note"] or f"{o['op']}: not modelled", {}
    if o["family"] == "collective":
        return "communication", f"from shapes: {what}: {o['min_bytes'] / 1e6:,.1f} MB over the links", {}
    if not ceilings or "dram" not in ceilings:
        return None, f"{what}: {whose}", {}
    # a multi_tensor_apply launch of several: its blocks' share of the work in its own time
    part = o["launch_blocks"] / o["op_blocks"] if o.get("op_blocks") else None
    dur = (o.get("launch_ns") if part is not None else o["gpu_ns"]) or 0
    if dur <= 0:
        return None, f"{what}: its kernels have no duration", {}
    key = _ceiling(o["family"], o["precision"])
    peak = ceilings.get(key) or ceilings.get("fp32")
    bw = ceilings["dram"]
    # the bytes its kernel moves where the model knows the stock kernel moves more than the minimum
    moved = aten.kernel_bytes(o["op"], _operands(o))
    flops, nbytes = (o["flops"] * part, o["min_bytes"] * part) if part is not None else (o["flops"], o["min_bytes"])
    t_mem = (moved[0] if moved else nbytes) / bw * 1e9
    t_flop = flops / peak * 1e9 if peak else 0.0
    mem_side = t_mem >= t_flop
    roof = "dram" if mem_side else ("tensor_core" if key.endswith("_tensor") else "compute")
    attained = max(t_mem, t_flop) / dur
    ai = o["flops"] / o["min_bytes"] if o["min_bytes"] else float("inf")
    ridge = peak / bw if peak else None
    ev = {
        "op": o["op"],
        "op_id": o["op_id"],
        "family": o["family"],
        "flops": o["flops"],
        "min_bytes": o["min_bytes"],
        "precision": o["precision"],
        "op_gpu_ns": dur,
        "op_kernels": o["kernels"],
        "ceiling": key,
        "intensity": ai,
        "ridge": ridge,
        "attained": attained,
        "peaks": whose,
        "note": o["note"] or None,
        "kernel_bytes": moved[0] if moved else None,
        "launch_share": part,
    }
    if part is not None:
        ev["op_gpu_ns"] = o["gpu_ns"]
        ev["launch_ns"] = dur
        where = (
            f"; this launch {o['launch_blocks']:,} of its {o['op_blocks']:,} multi_tensor_apply blocks"
            f" ({flops / 1e9:,.3g} GFLOP, {nbytes / 1e6:,.3g} MB) in {dur / 1e3:,.1f} us"
        )
    else:
        where = f" in {dur / 1e3:,.1f} us" + (f" over {o['kernels']} kernels" if o["kernels"] > 1 else "")
    head = (
        f"from shapes: {what}: {o['flops'] / 1e9:,.3g} GFLOP, {o['min_bytes'] / 1e6:,.3g} MB minimum "
        f"({ai:,.3g} FLOP/B vs the {key} ridge {ridge:,.0f})"
        + where
        + (f"; {moved[0] / 1e6:,.3g} MB moved ({moved[1]})" if moved else "")
    )
    share = f"{100 * attained:.0f} % of the {'DRAM' if mem_side else key} roof ({whose})"
    if attained >= ATTAINED:
        return roof, f"{head}: {share}", ev
    return "latency", f"{head}: only {share}: neither roof is near", ev
