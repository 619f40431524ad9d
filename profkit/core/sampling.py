"""Which launches Nsight Compute profiles when it samples, computed on a timeline.

`profkit capture -- COMMAND` runs the program under a timeline tracer first (nsys or the CUPTI
tracer) and under ncu second. ncu profiles a sample: with `--filter-mode per-launch-config
--launch-count K` it profiles the first K launches of each distinct kernel and launch
configuration. On the H100 (ncu 2025.3.1) "distinct" meant function name, grid, block and
shared memory: a 52-launch program of 12 such keys (14 by full template name) gave exactly those
12 first launches, in launch order (tests/data/field-h100/ws_perconfig.ncu-rep.xz).

The same rule, applied to the timeline (`select`), tells before ncu starts how many launches
it will profile (the plan, its time estimate and progress total) and, after it ran, which
timeline launch each profiled launch was (`pairs`: the store links them). Every other timeline
launch of a sampled kernel points at its measured one (`sampled_from`, by `fine_key`).

Pure functions over plain rows (no I/O): the capture and the store both use them.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field

# what ncu costs per profiled launch, seconds, by metric set: replay passes x (save, run,
# restore) plus report writing; measured on the H100 (benchmarks/results/capture.md)
SECONDS_PER_LAUNCH = {"lean": 0.25, "roofline": 0.6, "full": 2.5}
# the rows sampling reads, in this order (a timeline's KERNEL_FIELDS subset, or store columns)
FIELDS = (
    "kernel_name",
    "short_name",
    "grid_x",
    "grid_y",
    "grid_z",
    "block_x",
    "block_y",
    "block_z",
    "shared_mem_dynamic",
    "nvtx_path",
    "api_start_ns",
    "start_ns",
    "pid",
    "seq",
    "duration_ns",
)
_K, _S, _GX, _GY, _GZ, _BX, _BY, _BZ, _SMEM, _PATH, _API, _START, _PID, _SEQ, _DUR = range(len(FIELDS))


@dataclass
class Spec:
    """What ncu was told to profile. Recorded with the ncu report (its facts `ncu_filter`) so
    the store can link each profiled launch to its timeline launch, also when loaded later."""

    per_config: bool = True  # --filter-mode per-launch-config (else every launch in the window)
    samples: int = 1  # --launch-count (per configuration)
    skip: int = 0  # --launch-skip (per configuration): the warm-up launches
    key: str = "function"  # ncu --kernel-name-base the configurations are told apart by
    # (capture asks for "mangled": each template instance its own)
    names: list[str] | None = None  # only these kernels (short names): the --max-kernels cap
    ranges: list[str] | None = None  # only launches under one of these NVTX ranges (--range/--step)
    time: list[list[int]] | None = None  # only launches called inside these [t0, t1) (cudaProfilerStart/Stop)
    # [skip, count]: by launch index, every thread's launches in API order per process: skip that
    # many launches (any kernel), then profile the next `count` in the window (--launch-skip-before-match
    # / --launch-count; per_config off). A step's backward, launched by autograd's own thread, is
    # outside the step's NVTX range on that thread: an index window holds it (capture --step)
    launches: list[int] | None = None

    def as_dict(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v is not None}

    @classmethod
    def from_dict(cls, d: dict) -> Spec:
        known = {k: d[k] for k in cls.__dataclass_fields__ if k in d}
        return cls(**known)


def config(row) -> tuple:
    """ncu's per-launch-config key: function name, grid, block, shared memory."""
    return (row[_S], row[_GX], row[_GY], row[_GZ], row[_BX], row[_BY], row[_BZ], row[_SMEM] or 0)


def fine_key(row) -> tuple:
    """A kernel and its launch configuration, told apart by full (demangled) name: two template
    instances of one function are two kernels. The `sampled_from` key."""
    return (row[_K],) + config(row)[1:]


def _order(row):
    t = row[_API] if row[_API] is not None else row[_START]
    return (t if t is not None else 0, row[_SEQ] if row[_SEQ] is not None else 0)


def under_range(path: str | None, name: str) -> bool:
    """Is NVTX range `name` on the stack `path` ('a/b/c')? A name may itself hold '/'."""
    return bool(path) and f"/{name}/" in f"/{path}/"


def in_window(row, spec: Spec) -> bool:
    if spec.names is not None and row[_S] not in spec.names:
        return False
    if spec.ranges and not any(under_range(row[_PATH], r) for r in spec.ranges):
        return False
    if spec.time:
        t = row[_API] if row[_API] is not None else row[_START]
        if t is None or not any(a <= t < b for a, b in spec.time):
            return False
    return True


def select(rows, spec: Spec) -> list[int]:
    """Indices of the rows ncu profiles under `spec`, in launch order."""
    order = sorted(range(len(rows)), key=lambda i: _order(rows[i]))
    out: list[int] = []
    seen: dict[tuple, int] = {}
    index: dict = {}  # per process: launches so far, and those profiled
    for i in order:
        r = rows[i]
        if spec.launches is not None:
            at, done = index.get(r[_PID], (0, 0))
            index[r[_PID]] = (at + 1, done)
            if at < spec.launches[0] or done >= spec.launches[1]:
                continue
        if not in_window(r, spec):
            continue
        if spec.launches is not None:
            index[r[_PID]] = (index[r[_PID]][0], index[r[_PID]][1] + 1)
        if not spec.per_config:
            out.append(i)
            continue
        k = (r[_PID],) + (config(r) if spec.key == "function" else fine_key(r))
        n = seen.get(k, 0)
        seen[k] = n + 1
        if spec.skip <= n < spec.skip + spec.samples:
            out.append(i)
    return out


@dataclass
class Plan:
    spec: Spec
    launches: int  # on the timeline
    in_window: int  # of which ncu may profile (window, cap)
    kernels: int  # distinct kernels (short names) on the timeline
    configs: int  # distinct kernel + configuration keys in the window
    profiled: int  # launches ncu will profile
    seconds: float  # estimated ncu time, program run included
    left_out: dict = field(default_factory=dict)  # why some kernels get no counters: {reason: count}

    def describe(self, metrics: str) -> str:
        how = (
            "every launch"
            if not self.spec.per_config
            else f"{self.spec.samples} per kernel and launch configuration"
            + (f" after {self.spec.skip} warm-up launches of each" if self.spec.skip else "")
        )
        where = f" in {', '.join(self.spec.ranges)}" if self.spec.ranges else ""
        where += " between cudaProfilerStart and Stop" if self.spec.time else ""
        if self.spec.launches is not None:
            where += f" from launch {self.spec.launches[0]:,} of the process on (API order, every thread)"
        extra = "".join(f"; {n} {why}" for why, n in self.left_out.items() if n)
        return (
            f"timeline: {self.launches:,} launches of {self.kernels:,} kernels; ncu will profile "
            f"{self.profiled:,} ({how}{where}{extra}), about {_duration(self.seconds)} with the "
            f"{metrics} metric set"
        )


def _duration(s: float) -> str:
    return f"{s:.0f} s" if s < 120 else f"{s / 60:.0f} min"


def plan(rows, spec: Spec, metrics: str = "lean", max_kernels: int | None = None, program_s: float = 0.0) -> Plan:
    """What ncu will profile, and how long it will take (the program's own run under ncu is
    about `program_s`, its run under the timeline tracer). Over `max_kernels`, kernels with
    the least GPU time on the timeline are left out (spec.names then lists those kept)."""
    window = [r for r in rows if in_window(r, Spec(ranges=spec.ranges, time=spec.time, names=spec.names))]
    chosen = select(rows, spec)
    left: dict = {}
    if spec.skip and spec.per_config:
        measured = {fine_key(rows[i]) for i in chosen}
        once = {fine_key(r) for r in window} - measured
        left[
            f"kernel configurations launched {spec.skip} time{'s' if spec.skip > 1 else ''} or fewer "
            "(warm-up only: no counters)"
        ] = len(once)
    if max_kernels is not None and len(chosen) > max_kernels and spec.key in ("function", "mangled"):
        per_name: dict[str, list[int]] = {}
        for i in chosen:
            per_name.setdefault(rows[i][_S], []).append(i)
        gpu_time: dict[str, int] = {}
        for r in window:
            gpu_time[r[_S]] = gpu_time.get(r[_S], 0) + (r[_DUR] or 0)
        keep, total = [], 0
        for name in sorted(per_name, key=lambda n: (-gpu_time.get(n, 0), n)):
            if total + len(per_name[name]) <= max_kernels:
                keep.append(name)
                total += len(per_name[name])
        dropped = len(per_name) - len(keep)
        if spec.launches is not None:  # ncu's --launch-count then counts only the kernels named
            kept = set(keep)
            spec.launches = [spec.launches[0], sum(rows[i][_S] in kept for i in chosen)]
        spec.names = sorted(keep)
        chosen = select(rows, spec)
        left[f"kernels left out by --max-kernels {max_kernels} (least GPU time first)"] = dropped
    return Plan(
        spec,
        len(rows),
        len(window),
        len({r[_S] for r in rows}),
        len({fine_key(r) for r in window}),
        len(chosen),
        program_s + len(chosen) * SECONDS_PER_LAUNCH.get(metrics, 1.0),
        left,
    )


def name_filter(names: list[str], key: str = "function") -> str:
    """ncu --kernel-name value selecting exactly these function names. Under the mangled name
    base a C++ function `name` appears as `<len(name)><name>` after a non-digit (Itanium ABI:
    _ZN2at6native29vectorized_elementwise_kernel...), an extern "C" one (Triton, cuBLAS's nvjet)
    as itself."""
    plain = "^(" + "|".join(re.escape(n) for n in names) + ")$"
    if key == "function":
        return "regex:" + plain
    if key != "mangled":
        raise ValueError(f"a --max-kernels cap needs function or mangled names, not {key!r}")
    return "regex:" + plain + "|(^|[^0-9])(" + "|".join(f"{len(n)}{re.escape(n)}" for n in names) + ")"


def ncu_filter_args(spec: Spec) -> list[str]:
    """The ncu arguments that make it profile what `select` predicts."""
    args: list[str] = []
    if spec.per_config:
        args += ["--filter-mode", "per-launch-config", "--launch-count", str(spec.samples)]
        if spec.skip:
            args += ["--launch-skip", str(spec.skip)]
        if spec.key != "function":
            args += ["--kernel-name-base", spec.key]
    if spec.names is not None:  # read in the same name base as the configurations
        args += ["--kernel-name", name_filter(spec.names, spec.key if spec.per_config else "function")]
    if spec.time:
        args += ["--profile-from-start", "off"]
    if spec.launches is not None:
        args += ["--launch-skip-before-match", str(spec.launches[0]), "--launch-count", str(spec.launches[1])]
    return args


def pairs(timeline, profiled, spec: Spec) -> list[tuple[int, int]]:
    """(profiled index, timeline index) of each ncu launch and the timeline launch it measured.

    ncu profiles in launch order, so the k-th profiled launch of a kernel and configuration is
    the k-th predicted one of the same key. Launches whose full names differ between the tools
    (ncu's CSV exports shorten them) pair on the function name instead."""
    predicted = select(timeline, spec)
    out: list[tuple[int, int]] = []
    for key in (fine_key, config):
        want: dict = {}
        taken = {t for _, t in out}
        for i in predicted:
            if i not in taken:
                want.setdefault(key(timeline[i]), []).append(i)
        done = {p for p, _ in out}
        for j in sorted(range(len(profiled)), key=lambda j: profiled[j][_SEQ] or 0):
            if j in done:
                continue
            todo = want.get(key(profiled[j]))
            if todo:
                out.append((j, todo.pop(0)))
    return out


def siblings(timeline, measured) -> dict[int, int]:
    """{timeline index: measured timeline index} for each launch without counters whose kernel
    and configuration (fine_key) were measured on another launch: the same NVTX path first
    (the same operator), else the earliest measured one."""
    by_key: dict = {}
    for i in sorted(measured, key=lambda i: _order(timeline[i])):
        by_key.setdefault(fine_key(timeline[i]), []).append(i)
    out = {}
    for i, r in enumerate(timeline):
        if i in measured:
            continue
        cands = by_key.get(fine_key(r))
        if cands:
            out[i] = next((c for c in cands if timeline[c][_PATH] == r[_PATH]), cands[0])
    return out
