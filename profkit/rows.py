"""Plain rows a parser yields: no SQL, no files. The store is their only reader.

Rows are tuples (not dicts) in the field order below: a million kernels must fit in a few
hundred MB.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

# one kernel launch
KERNEL_FIELDS = (
    "seq", "kernel_name", "short_name", "nvtx_range", "nvtx_path", "start_ns", "end_ns", "duration_ns",
    "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z", "registers_per_thread",
    "shared_mem_static", "shared_mem_dynamic", "stream", "device", "correlation_id",
    "api_name", "api_start_ns", "api_end_ns", "pid", "tid",
)
# one NVTX range (push/pop or start/end)
RANGE_FIELDS = ("domain", "text", "kind", "start_ns", "end_ns", "pid", "tid", "depth", "path")
# one counter of one kernel: (kernel seq, metric, unit, value)
COUNTER_FIELDS = ("seq", "metric", "unit", "value")


@dataclass
class Parsed:
    path: str
    format: str  # nsys-sqlite | ncu-rep | ncu-csv | cupti-trace
    source: str  # nsys | ncu | cupti: what produced the launches
    kernels: list[tuple] = field(default_factory=list)
    ranges: list[tuple] = field(default_factory=list)
    counters: list[tuple] = field(default_factory=list)
    facts: dict = field(default_factory=dict)  # gpu_name, gpu_uuid, sm_count, tool versions, ...

    def summary(self) -> dict:
        return {"kernels": len(self.kernels), "ranges": len(self.ranges), "counters": len(self.counters)}


def kernel_row(**kw) -> tuple:
    return tuple(kw.get(f) for f in KERNEL_FIELDS)


def ncu_kernel_row(seq: int, name: str, short: str, nvtx_range, nvtx_path, values: dict) -> tuple:
    """A kernel row from one ncu launch: launch facts come from its normalised counters
    (values: metric -> (value, unit))."""
    from .metrics import LAUNCH_FIELDS

    kw = {"seq": seq, "kernel_name": name, "short_name": short, "nvtx_range": nvtx_range, "nvtx_path": nvtx_path}
    for col, metric in LAUNCH_FIELDS.items():
        if metric in values:
            kw[col] = count(values[metric][0])
    return kernel_row(**kw)


def count(v: float) -> int | None:
    """A counter value as an integer fact (grid size, SM count); inf or beyond 64 bits (a
    corrupt report) cannot be one and is left unknown."""
    return int(round(v)) if math.isfinite(v) and abs(v) < 2**63 else None
