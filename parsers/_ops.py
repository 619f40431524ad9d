"""Operators with recorded shapes, tied to the kernels they launched: shared by the trace
parsers (Kineto's record_shapes cpu_ops, nsys's autograd-shapes NVTX ranges).

A kernel's operator is the innermost operator with shapes that holds its launch call on the
launching thread (aten::linear holds aten::addmm, which holds cudaLaunchKernel: addmm launched
it). Backward operators run on autograd's own thread and launch there, so the same rule ties
them to their kernels.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict

# autograd's accumulation of a gradient into its parameter: its one input is the gradient, the
# parameter's size (kept with the ops though it launches nothing: it sizes optimizer lists)
GRAD_OP = "torch::autograd::AccumulateGrad"


def launching_ops(ops: list[tuple], calls: list[tuple]) -> dict[int, int]:
    """ops: (start, end, pid, tid) per operator; calls: (key, start, pid, tid) per launch call.
    -> {key: index of the innermost op holding that call}."""
    by_thread: dict = defaultdict(list)
    for i, (s, e, pid, tid) in enumerate(ops):
        by_thread[(pid, tid)].append((s, 0, -e, i))
    for key, s, pid, tid in calls:
        if (pid, tid) in by_thread:
            by_thread[(pid, tid)].append((s, 1, 0, key))
    out = {}
    for events in by_thread.values():
        # at one instant an op opens before a call it holds; an outer op (later end) before an inner
        events.sort(key=lambda x: (x[0], x[1], x[2]))
        stack: list[tuple[int, int]] = []  # (end, op index)
        for t, kind, neg_end, ref in events:
            while stack and stack[-1][0] < t:
                stack.pop()
            if kind == 0:
                stack.append((-neg_end, ref))
            elif stack:
                out[ref] = stack[-1][1]
    return out


# torch.autograd.profiler.emit_nvtx(record_shapes=True) and nsys --pytorch=autograd-shapes-nvtx:
# "aten::mm, seq = 12, op_id = 40, sizes = [[8192, 768], [768, 3072]]", then input_op_ids where
# the op has tensor inputs from other ops (PyTorch's getNvtxStr: name, seq, op_id, sizes,
# input_op_ids, each only when present)
_NVTX_OP = re.compile(
    r"^(?P<op>[\w:.]+)(?:, seq = -?\d+)?(?:, op_id = (?P<id>\d+))?"
    r", sizes = (?P<sizes>\[.*?\])(?:, input_op_ids = (?P<inputs>.*))?$"
)
_PRODUCER = re.compile(r"\((-?\d+),\s*(-?\d+)\)")


def nvtx_op(text: str | None) -> tuple[str, list] | None:
    """(op, input dims) of an autograd-shapes NVTX range's text, None for any other range."""
    p = _nvtx_op(text)
    return p[:2] if p else None


def _nvtx_op(text: str | None) -> tuple[str, list, int | None, str | None] | None:
    """(op, input dims, op id, input producers as JSON [[id, output], ...]) of an
    autograd-shapes NVTX range's text; the producers only where there is one per input."""
    if not text or "sizes = " not in text:
        return None
    m = _NVTX_OP.match(text)
    if not m:
        return None
    try:
        sizes = json.loads(m.group("sizes"))
    except ValueError:
        return None
    if not isinstance(sizes, list):
        return None
    ident = m.group("id")
    producers = [[int(a), int(b)] for a, b in _PRODUCER.findall(m.group("inputs") or "")]
    ids = json.dumps(producers, separators=(",", ":")) if ident and len(producers) == len(sizes) else None
    return m.group("op"), sizes, int(ident) if ident else None, ids


def ops_from_kernel_ranges(kernels) -> list[tuple]:
    """OP_FIELDS rows from kernel rows (KERNEL_FIELDS) whose innermost NVTX range is an
    autograd-shapes range: one op per distinct range text (emit_nvtx's seq and op_id make each
    call's text its own), its kernels those launched inside it. The payload has no dtypes."""
    from profkit.core.rows import KERNEL_FIELDS

    seq, kr, st, en, pid, tid = (
        KERNEL_FIELDS.index(f) for f in ("seq", "nvtx_range", "start_ns", "end_ns", "pid", "tid")
    )
    found: dict[str, list] = {}
    parsed: dict[str, tuple[str, list, int | None, str | None] | None] = {}
    for k in kernels:
        text = k[kr]
        if text not in parsed:
            parsed[text] = _nvtx_op(text)
        if parsed[text] is None:
            continue
        row = found.get(text)
        if row is None:
            found[text] = [k[st], k[en], k[pid], k[tid], [k[seq]]]
        else:
            row[0], row[1] = min(row[0], k[st]), max(row[1], k[en])
            row[4].append(k[seq])
    rows = []
    for text, r in found.items():
        op, sizes, ident, producers = parsed[text] or ("", [], None, None)
        rows.append(
            (
                op,
                r[0],
                r[1],
                r[2],
                r[3],
                json.dumps(sizes, separators=(",", ":")),
                None,
                None,
                None,
                None,
                sorted(r[4]),
                "nvtx",
                ident,
                producers,
            )
        )
    return rows


# emit_nvtx names each range "op, seq = N, op_id = M[, sizes = [...], input_op_ids = [...]]": one
# name per call; the ops table keeps what those carry
_TORCH_SUFFIX = re.compile(r", (?:seq|op_id|sizes|input_op_ids) = [^/]*")


def clean_torch_name(text):
    return _TORCH_SUFFIX.sub("", text) if isinstance(text, str) else text


def clean_torch_ranges(report) -> None:
    """Range names as PyTorch's operators are called (aten::addmm), without the per-call
    sequence and op ids emit_nvtx appends: the same operator is one range name again. The ops
    table is built from the names first."""
    from profkit.core.rows import KERNEL_FIELDS, RANGE_FIELDS

    if not report.ops:
        report.ops = ops_from_kernel_ranges(report.kernels)
    kr, kp = KERNEL_FIELDS.index("nvtx_range"), KERNEL_FIELDS.index("nvtx_path")
    report.kernels = [k[:kr] + (clean_torch_name(k[kr]), clean_torch_name(k[kp])) + k[kp + 1 :] for k in report.kernels]
    t, pth = RANGE_FIELDS.index("text"), RANGE_FIELDS.index("path")
    report.ranges = [tuple(clean_torch_name(x) if i in (t, pth) else x for i, x in enumerate(r)) for r in report.ranges]
