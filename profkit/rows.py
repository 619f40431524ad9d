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
# one result of ncu's guided analysis for one kernel: severity INF | OPT | WRN | ERR (ncu's own
# abbreviations), speedup_type local | global, estimated_speedup_pct None where ncu gave none
RULE_FIELDS = ("seq", "section", "rule", "severity", "message", "speedup_type", "estimated_speedup_pct")


@dataclass
class Parsed:
    path: str
    format: str  # a parser's FORMAT: nsys-sqlite | ncu-rep | ncu-csv | ncu-csv-details | cupti-trace | ...
    source: str  # nsys | ncu | cupti: what produced the launches
    kernels: list[tuple] = field(default_factory=list)
    ranges: list[tuple] = field(default_factory=list)
    counters: list[tuple] = field(default_factory=list)
    facts: dict = field(default_factory=dict)  # gpu_name, gpu_uuid, sm_count, tool versions, ...
    rules: list[tuple] = field(default_factory=list)  # ncu rule results (RULE_FIELDS)

    def summary(self) -> dict:
        return {"kernels": len(self.kernels), "ranges": len(self.ranges), "counters": len(self.counters),
                "rules": len(self.rules)}


def kernel_row(**kw) -> tuple:
    return tuple(kw.get(f) for f in KERNEL_FIELDS)


def ncu_kernel_row(seq: int, name: str, short: str, nvtx_range, nvtx_path, values: dict,
                   given: dict | None = None) -> tuple:
    """A kernel row from one ncu launch: launch facts come from its normalised counters
    (values: metric -> (value, unit)), else from `given` (kernel fields a CSV prints in its own
    columns: grid and block as (x, y, z), stream, device). Launch dimensions without either:
    only the total (launch__grid_size / launch__block_size) in grid_x / block_x, y and z
    unknown (NULL); reports of older ncu versions carry only the totals (docs/schema.md)."""
    from .metrics import LAUNCH_FIELDS, LAUNCH_TOTALS

    kw = {"seq": seq, "kernel_name": name, "short_name": short, "nvtx_range": nvtx_range, "nvtx_path": nvtx_path}
    for col, metric in LAUNCH_FIELDS.items():
        if metric in values:
            kw[col] = count(values[metric][0])
    given = given or {}
    for col in ("stream", "device"):
        if kw.get(col) is None and given.get(col) is not None:
            kw[col] = given[col]
    for axes, total in LAUNCH_TOTALS.items():
        cols = tuple(f"{axes}_{a}" for a in "xyz")
        if any(kw.get(c) is not None for c in cols):
            continue
        if given.get(axes) is not None:
            kw.update(zip(cols, given[axes]))
        elif total in values:
            kw[cols[0]] = count(values[total][0])
    return kernel_row(**kw)


def count(v: float) -> int | None:
    """A counter value as an integer fact (grid size, SM count); inf or beyond 64 bits (a
    corrupt report) cannot be one and is left unknown."""
    return int(round(v)) if math.isfinite(v) and abs(v) < 2**63 else None
