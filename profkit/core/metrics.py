"""The one table of Nsight Compute metrics profkit asks for and reads.

Analyses ask for a short name ("dram_pct"); this table maps it to the ncu metric names
that carry it, newest spelling first, because names differ between architectures and
ncu versions. Nothing else in profkit spells a raw ncu metric name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Metric:
    short: str
    names: tuple[str, ...]  # candidates, first one present in a report wins
    meaning: str
    sets: frozenset[str]  # metric sets that collect it: lean, roofline
    also: tuple[str, ...] = ()  # spellings seen in users' reports: read after `names`, never asked for

    @property
    def read(self) -> tuple[str, ...]:
        """Every name this value is read from, in order."""
        return self.names + self.also


def _m(
    short: str,
    names: str | tuple[str, ...],
    meaning: str,
    sets: str = "lean roofline",
    also: str | tuple[str, ...] = (),
) -> Metric:
    if isinstance(names, str):
        names = (names,)
    if isinstance(also, str):
        also = (also,)
    return Metric(short, tuple(names), meaning, frozenset(sets.split()), tuple(also))


METRICS: tuple[Metric, ...] = (
    # time and clocks
    _m("duration", "gpu__time_duration.sum", "kernel duration"),
    _m(
        "sm_clock",
        "sm__cycles_elapsed.avg.per_second",
        "SM clock while the kernel ran",
        also="gpc__cycles_elapsed.avg.per_second",
    ),  # ncu's "SM Frequency" (SpeedOfLight section)
    _m("dram_clock", "dram__cycles_elapsed.avg.per_second", "DRAM clock while the kernel ran"),
    # the L2 and L1 roofline ceilings need their own clocks (ncu's hierarchical roofline uses these)
    _m("l2_clock", "lts__cycles_elapsed.avg.per_second", "L2 clock while the kernel ran", "lean roofline"),
    _m("l1_clock", "l1tex__cycles_elapsed.avg.per_second", "L1/TEX clock while the kernel ran", "lean roofline"),
    # speed of light (ncu SpeedOfLight section)
    _m("sm_pct", "sm__throughput.avg.pct_of_peak_sustained_elapsed", "compute (SM) throughput, % of peak", "roofline"),
    _m(
        "mem_pct",
        "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
        "memory throughput, % of peak (max of DRAM, L2, L1)",
        "roofline",
    ),
    _m(
        "dram_pct",
        "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
        "DRAM throughput, % of peak (derived from DRAM bytes where absent)",
        "roofline",
        also="dram__throughput.avg.pct_of_peak_sustained_elapsed",
    ),  # users' --metrics lists (same value)
    _m("l2_pct", "lts__throughput.avg.pct_of_peak_sustained_elapsed", "L2 throughput, % of peak", "roofline"),
    _m("l1_pct", "l1tex__throughput.avg.pct_of_peak_sustained_active", "L1/TEX throughput, % of peak", "roofline"),
    # pipes
    _m(
        "tensor_pct",
        (
            "sm__pipe_tensor_type_hmma_hgmma_qgmma_imma_igmma_bmma_bgmma_cycles_active.avg.pct_of_peak_sustained_elapsed",
            "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
            "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
        ),
        "tensor pipe (HMMA/HGMMA) active cycles, % of peak",
    ),
    _m(
        "tensor_gmma_pct",
        "sm__inst_executed_pipe_tensor_op_gmma.avg.pct_of_peak_sustained_active",
        "warpgroup MMA (HGMMA/QGMMA) instructions issued, % of peak",
        "roofline",
    ),
    _m(
        "fma_pct",
        "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active",
        "FMA pipe active cycles, % of peak",
        "roofline",
    ),
    _m(
        "alu_pct",
        "sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active",
        "ALU pipe active cycles, % of peak",
        "roofline",
    ),
    _m(
        "issue_pct",
        "sm__inst_issued.avg.pct_of_peak_sustained_active",
        "instructions issued, % of peak (the lean set's SM-busy measure)",
        "lean roofline",
    ),
    # occupancy and launch
    _m("achieved_occupancy", "sm__warps_active.avg.pct_of_peak_sustained_active", "achieved occupancy, % of max warps"),
    _m("theoretical_occupancy", "sm__maximum_warps_per_active_cycle_pct", "theoretical occupancy, % of max warps"),
    _m("limit_registers", "launch__occupancy_limit_registers", "blocks per SM allowed by registers"),
    _m("limit_shared_mem", "launch__occupancy_limit_shared_mem", "blocks per SM allowed by shared memory"),
    _m("limit_warps", "launch__occupancy_limit_warps", "blocks per SM allowed by warps"),
    _m("limit_blocks", "launch__occupancy_limit_blocks", "blocks per SM allowed by the block limit"),
    _m("grid_size", "launch__grid_size", "blocks in the grid"),
    _m("block_size", "launch__block_size", "threads per block"),
    _m("registers_per_thread", "launch__registers_per_thread", "registers per thread"),
    _m("shared_mem_per_block", "launch__shared_mem_per_block", "shared memory per block (static + dynamic)"),
    _m("waves_per_sm", "launch__waves_per_multiprocessor", "waves per SM"),
    _m("sm_count", "device__attribute_multiprocessor_count", "SMs on the device", also="launch__sm_count"),
    # bytes (roofline x axis)
    _m("dram_bytes", "dram__bytes.sum", "bytes moved to and from DRAM (derived: read + write)", "roofline"),
    _m("dram_read_bytes", "dram__bytes_read.sum", "bytes read from DRAM"),
    _m("dram_write_bytes", "dram__bytes_write.sum", "bytes written to DRAM"),
    _m("dram_bytes_peak", "dram__bytes.sum.peak_sustained", "DRAM bytes per DRAM cycle at peak"),
    _m("l2_bytes", "lts__t_bytes.sum", "bytes through L2", "lean roofline"),
    _m("l1_bytes", "l1tex__t_bytes.sum", "bytes through L1/TEX", "lean roofline"),
    _m("l2_bytes_peak", "lts__t_bytes.sum.peak_sustained", "L2 bytes per cycle at peak", "lean roofline"),
    _m("l1_bytes_peak", "l1tex__t_bytes.sum.peak_sustained", "L1 bytes per cycle at peak", "lean roofline"),
    # FLOPs (roofline y axis): SASS thread instructions for CUDA cores, op paths for tensor cores
    # (the sm__ spellings count the same instructions summed per SM: users' --metrics lists have them)
    _m(
        "fadd",
        "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum",
        "FP32 adds",
        also="sm__sass_thread_inst_executed_op_fadd_pred_on.sum",
    ),
    _m(
        "fmul",
        "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum",
        "FP32 multiplies",
        also="sm__sass_thread_inst_executed_op_fmul_pred_on.sum",
    ),
    _m(
        "ffma",
        "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum",
        "FP32 fused multiply-adds (2 FLOPs)",
        also="sm__sass_thread_inst_executed_op_ffma_pred_on.sum",
    ),
    _m(
        "ffma_peak",
        "sm__inst_executed_pipe_fma.sum.peak_sustained",
        "FMA instructions per cycle at peak (warp level; the FP32 roof)",
        "lean roofline",
    ),
    _m("tensor_ops_bf16", "sm__ops_path_tensor_src_bf16_dst_fp32.sum", "tensor FLOPs, bf16 inputs"),
    _m(
        "tensor_ops_fp16",
        ("sm__ops_path_tensor_src_fp16.sum", "sm__ops_path_tensor_src_fp16_dst_fp32.sum"),
        "tensor FLOPs, fp16 inputs (3 passes on its own: roofline set only)",
        "roofline",
    ),
    _m(
        "tensor_ops_fp16_fp16",
        "sm__ops_path_tensor_src_fp16_dst_fp16.sum",
        "tensor FLOPs, fp16 inputs, fp16 accumulate",
        "roofline",
    ),
    _m("tensor_ops_fp8", "sm__ops_path_tensor_src_fp8.sum", "tensor FLOPs, fp8 inputs"),
    _m("tensor_ops_tf32", "sm__ops_path_tensor_src_tf32_dst_fp32.sum", "tensor FLOPs, tf32 inputs", "roofline"),
    _m(
        "tensor_ops_bf16_peak",
        "sm__ops_path_tensor_src_bf16_dst_fp32.sum.peak_sustained",
        "bf16 tensor FLOPs per cycle at the 2:4-sparse peak (dense: half; docs/roofline.md)",
    ),
    _m(
        "tensor_ops_fp8_peak",
        "sm__ops_path_tensor_src_fp8.sum.peak_sustained",
        "fp8 tensor FLOPs per cycle at the sparse peak (dense: half)",
        "lean roofline",
    ),
    _m(
        "tensor_ops_fp16_peak",
        ("sm__ops_path_tensor_src_fp16.sum.peak_sustained", "sm__ops_path_tensor_src_fp16_dst_fp32.sum.peak_sustained"),
        "fp16 tensor FLOPs per cycle at peak",
        "roofline",
    ),
    _m(
        "tensor_ops_tf32_peak",
        "sm__ops_path_tensor_src_tf32_dst_fp32.sum.peak_sustained",
        "tf32 tensor FLOPs per cycle at peak",
        "roofline",
    ),
    _m(
        "dadd",
        "smsp__sass_thread_inst_executed_op_dadd_pred_on.sum",
        "FP64 adds",
        "roofline",
        also="sm__sass_thread_inst_executed_op_dadd_pred_on.sum",
    ),
    _m(
        "dmul",
        "smsp__sass_thread_inst_executed_op_dmul_pred_on.sum",
        "FP64 multiplies",
        "roofline",
        also="sm__sass_thread_inst_executed_op_dmul_pred_on.sum",
    ),
    _m(
        "dfma",
        "smsp__sass_thread_inst_executed_op_dfma_pred_on.sum",
        "FP64 fused multiply-adds (2 FLOPs)",
        "roofline",
        also="sm__sass_thread_inst_executed_op_dfma_pred_on.sum",
    ),
    _m(
        "dfma_peak",
        "sm__sass_thread_inst_executed_op_dfma_pred_on.sum.peak_sustained",
        "FP64 FMA thread instructions per cycle at peak",
        "roofline",
    ),
    # read where a report has them, never asked for (sets ""): ncu's default set and device attributes
    _m(
        "ffma_thread_peak",
        "sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained",
        "FP32 FMA thread instructions per cycle at peak (ncu's default roofline chart; the FP32 roof where ffma_peak is absent)",
        "",
    ),
    _m(
        "dram_bytes_rate",
        "dram__bytes.sum.per_second",
        "DRAM bytes per second (ncu's Memory Workload Analysis 'Memory Throughput')",
        "",
    ),
    _m(
        "sm_clock_max", "device__attribute_clock_rate", "the GPU's maximum (boost) SM clock, kHz (device attribute)", ""
    ),
    _m(
        "mem_clock_max",
        "device__attribute_memory_clock_rate",
        "the GPU's peak memory clock, kHz (device attribute)",
        "",
    ),
    _m(
        "mem_bus_width",
        "device__attribute_global_memory_bus_width",
        "global memory bus width, bits (device attribute)",
        "",
    ),
    # ncu's default and full sets (its roofline chart) hold the SASS counts as rates per elapsed
    # cycle; x smsp__cycles_elapsed.avg they are the counts (equal to the .sum launch for launch
    # on the H200 captures in tests/data/lean-parity)
    *(
        _m(
            f"{op}_per_cycle",
            f"smsp__sass_thread_inst_executed_op_{op}_pred_on.sum.per_cycle_elapsed",
            f"{op} thread instructions per elapsed SMSP cycle (ncu's roofline chart)",
            "",
        )
        for op in ("fadd", "fmul", "ffma", "dadd", "dmul", "dfma")
    ),
    _m("smsp_cycles", "smsp__cycles_elapsed.avg", "elapsed cycles per SM sub-partition", ""),
    _m("cc_major", "device__attribute_compute_capability_major", "compute capability, major (device attribute)", ""),
    _m("cc_minor", "device__attribute_compute_capability_minor", "compute capability, minor (device attribute)", ""),
)

BY_SHORT: dict[str, Metric] = {m.short: m for m in METRICS}

# kernels-view column -> the ncu metric that carries it in every report
LAUNCH_FIELDS = {
    "duration_ns": "gpu__time_duration.sum",
    "grid_x": "launch__grid_dim_x",
    "grid_y": "launch__grid_dim_y",
    "grid_z": "launch__grid_dim_z",
    "block_x": "launch__block_dim_x",
    "block_y": "launch__block_dim_y",
    "block_z": "launch__block_dim_z",
    "registers_per_thread": "launch__registers_per_thread",
    "shared_mem_static": "launch__shared_mem_per_block_static",
    "shared_mem_dynamic": "launch__shared_mem_per_block_dynamic",
    "stream": "launch__stream_id",
    "device": "launch__device_id",
}
# the totals that stand in for the per-axis launch dimensions where a report lacks those
LAUNCH_TOTALS = {"grid": "launch__grid_size", "block": "launch__block_size"}

# ncu's details page (`--page details`, and the sections of a capture with `--section`/`--set`)
# prints section values under display names. Those that mean exactly one of the metrics above
# (checked value for value against the raw metrics of the same H100 report, ncu 2025.3.1,
# tests/data/field-h100/ws_rules.*) are also stored under the metric's own name, so analyses
# read them; the display name is kept beside (docs/ncu-inputs.md lists the table and why).
# display name -> (ncu metric, unit the row must have: "%" for a percentage, "" for any)
DETAILS_NAMES: dict[str, tuple[str, str]] = {
    "Duration": ("gpu__time_duration.sum", ""),
    "DRAM Frequency": ("dram__cycles_elapsed.avg.per_second", ""),
    "SM Frequency": ("gpc__cycles_elapsed.avg.per_second", ""),
    "Compute (SM) Throughput": ("sm__throughput.avg.pct_of_peak_sustained_elapsed", "%"),
    "Memory Throughput": ("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", "%"),
    "DRAM Throughput": ("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed", "%"),
    "L1/TEX Cache Throughput": ("l1tex__throughput.avg.pct_of_peak_sustained_active", "%"),
    "L2 Cache Throughput": ("lts__throughput.avg.pct_of_peak_sustained_elapsed", "%"),
    "Achieved Occupancy": ("sm__warps_active.avg.pct_of_peak_sustained_active", "%"),
    "Theoretical Occupancy": ("sm__maximum_warps_per_active_cycle_pct", "%"),
    "Block Limit Registers": ("launch__occupancy_limit_registers", ""),
    "Block Limit Shared Mem": ("launch__occupancy_limit_shared_mem", ""),
    "Block Limit Warps": ("launch__occupancy_limit_warps", ""),
    "Block Limit SM": ("launch__occupancy_limit_blocks", ""),
    "Grid Size": ("launch__grid_size", ""),
    "Block Size": ("launch__block_size", ""),
    "Registers Per Thread": ("launch__registers_per_thread", ""),
    "Static Shared Memory Per Block": ("launch__shared_mem_per_block_static", ""),
    "Dynamic Shared Memory Per Block": ("launch__shared_mem_per_block_dynamic", ""),
    "Waves Per SM": ("launch__waves_per_multiprocessor", ""),
    "# SMs": ("device__attribute_multiprocessor_count", ""),
}
# the Memory Workload Analysis section's "Memory Throughput" is a rate, not a percentage
DETAILS_RATE_NAMES: dict[str, str] = {"Memory Throughput": "dram__bytes.sum.per_second"}


def details_metric(name: str, unit: str) -> str | None:
    """The ncu metric a details-page display name (with its normalised unit) stands for, or None."""
    if unit == "byte/s":
        return DETAILS_RATE_NAMES.get(name)
    hit = DETAILS_NAMES.get(name)
    if hit is None or (hit[1] == "%" and unit != "%"):
        return None
    return hit[0]


SETS = ("lean", "roofline", "full")


def metric_names(metric_set: str) -> list[str]:
    """ncu --metrics list for a set; 'full' means ncu's own `--set full` and returns [].

    'lean' asks for each metric's first (current) spelling only: on Hopper the older
    spellings still exist and each costs its own counters, hence replay passes. 'roofline'
    asks for every spelling, so one list serves older GPUs and ncu versions too.
    """
    if metric_set not in SETS:
        raise ValueError(f"unknown metric set {metric_set!r}; choose one of {', '.join(SETS)}")
    if metric_set == "full":
        return []
    out: list[str] = []
    for m in METRICS:
        if metric_set in m.sets:
            out.extend(m.names[:1] if metric_set == "lean" else m.names)
    return list(dict.fromkeys(out))


def _bytes_pct(values: dict[str, float], what: str, peak: str, clock: str) -> float | None:
    """Bytes moved as % of (peak bytes/cycle x clock x duration): the throughput ncu's
    breakdown metrics report, from single counters that cost one pass instead of 5 to 9."""
    b, p, hz, t = (lookup(values, k) for k in (what, peak, clock, "duration"))
    if b is None or not p or not hz or not t:
        return None
    return 100.0 * b / (p * hz * t * 1e-9)


def _dram_bytes(values: dict[str, float]) -> float | None:
    r, w = lookup(values, "dram_read_bytes"), lookup(values, "dram_write_bytes")
    if r is not None and w is not None:
        return r + w
    rate, t = lookup(values, "dram_bytes_rate"), lookup(values, "duration")
    return rate * t * 1e-9 if rate is not None and t else None


def _count_from_rate(op: str):
    def f(values: dict[str, float]) -> float | None:
        rate, cycles = lookup(values, f"{op}_per_cycle"), lookup(values, "smsp_cycles")
        return rate * cycles if rate is not None and cycles is not None else None

    return f


# short name -> how to compute it where no report metric carries it
DERIVED = {
    **{op: _count_from_rate(op) for op in ("fadd", "fmul", "ffma", "dadd", "dmul", "dfma")},
    "dram_bytes": _dram_bytes,
    "dram_pct": lambda v: _bytes_pct(v, "dram_bytes", "dram_bytes_peak", "dram_clock"),
    "l2_bytes_pct": lambda v: _bytes_pct(v, "l2_bytes", "l2_bytes_peak", "l2_clock"),
    "l1_bytes_pct": lambda v: _bytes_pct(v, "l1_bytes", "l1_bytes_peak", "l1_clock"),
}


class Counters(dict):
    """{ncu metric name: value} of one launch that remembers what `lookup` found: classify,
    the model and advise read ~160 short names per launch, most derived from one another
    (profiled: lookup was a quarter of the main job's CPU). Any change forgets."""

    __slots__ = ("memo",)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.memo: dict[str, float | None] = {}

    def _forget(self):
        try:
            self.memo.clear()
        except AttributeError:  # unpickled or copied: built without __init__, then filled
            self.memo = {}

    def __setitem__(self, key, value):
        self._forget()
        super().__setitem__(key, value)

    def __delitem__(self, key):
        self._forget()
        super().__delitem__(key)

    def update(self, *args, **kwargs):
        self._forget()
        super().update(*args, **kwargs)

    def pop(self, *args):
        self._forget()
        return super().pop(*args)

    def popitem(self):
        self._forget()
        return super().popitem()

    def clear(self):
        self._forget()
        super().clear()

    def setdefault(self, key, default=None):
        self._forget()
        return super().setdefault(key, default)

    def __ior__(self, other: Any) -> Counters:  # type: ignore[misc]  # typeshed pairs it with the overloads of dict.__or__
        self._forget()
        return super().__ior__(other)


def lookup(values: dict[str, float], short: str) -> float | None:
    """Value of a short name in a {ncu metric name: value} mapping, else derived from the
    metrics it is made of (DERIVED), else None. Memoised on a Counters mapping."""
    if not values:  # a launch without counters (most of a timeline): nothing to read or derive
        return None
    memo = getattr(values, "memo", None)
    if memo is None:
        return _lookup(values, short)
    if short not in memo:
        memo[short] = _lookup(values, short)
    return memo[short]


def _lookup(values: dict[str, float], short: str) -> float | None:
    for name in BY_SHORT[short].read if short in BY_SHORT else ():
        if name in values and values[name] is not None:
            return values[name]
    f = DERIVED.get(short)
    return f(values) if f else None


if __name__ == "__main__":  # `python -m profkit.core.metrics lean` prints the ncu --metrics argument
    import sys

    print(",".join(metric_names(sys.argv[1] if len(sys.argv) > 1 else "lean")))
