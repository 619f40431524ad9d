"""What a capture is asked to do: built once from the command line and handed down whole, so
that every step of a capture reads the same choices (and a new option is one field, not a
parameter threaded through three layers)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Sampling:
    """How ncu samples a command (lab workloads are profiled whole within their ranges)."""

    samples: int = 1  # launches per kernel and launch configuration
    warmup: int = 0  # launches of each configuration skipped first
    max_kernels: int | None = 500  # hard cap on profiled launches
    all_launches: bool = False  # profile every launch (within the window)
    # ncu --kernel-name-base telling configurations apart: by function name two template
    # instances of one function (PyTorch's elementwise kernels) share one sample; mangled names
    # keep them apart (seen on the H200: 14 samples for 14 such kernels, 12 by function name)
    key: str = "mangled"


@dataclass(frozen=True)
class CaptureOptions:
    """One capture: a lab `workload` or a `command` (exactly one), its reports under OUT/<run>/.
    The defaults are the command line's."""

    run: str
    out: Path = Path("profiles")
    workload: str | None = None
    command: tuple[str, ...] | None = None
    variants: tuple[str, ...] = ()  # lab workloads: variants and shapes to run
    shapes: tuple[str, ...] = ()
    use_nsys: bool = True  # record a timeline
    use_ncu: bool = True  # collect counters
    metrics: str = "lean"  # lean, roofline or full
    source: bool = False  # ncu's Source Counters and the source text (per-line hotspots)
    include: tuple[str, ...] = ()  # ncu --nvtx-include (default: the workload's ranges)
    tracer: str = "auto"  # auto, nsys or cupti
    clock_control: str = "none"  # ncu --clock-control
    nsys: str | None = None  # paths to the tools (else $NSYS/$NCU, else PATH)
    ncu: str | None = None
    sample: Sampling = field(default_factory=Sampling)
    # commands: which part of the program ncu profiles
    range_name: str | None = None  # only launches inside this NVTX range
    step: int | None = None  # only step N (NVTX ranges 'step N')
    profiler_api: bool | None = None  # only between cudaProfilerStart/Stop (None: when called)
    torch_ranges: bool = False  # an NVTX range per PyTorch operator (emit_nvtx)
    # lab workloads: each variant's calls inside its range (3 where None), the calls cycling
    # over `rotate` input copies, the L2 filled with other data before each range (kernels/run.py)
    calls: int | None = None
    rotate: int | None = None
    l2_fill: bool = False
    ncu_ranks: tuple[int, ...] = ()  # a torchrun job (capture_ranks): the ranks ncu runs on

    def __post_init__(self):
        # sequences as tuples: the options stay what they were when built
        for name in ("variants", "shapes", "include", "ncu_ranks"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        if self.command is not None:
            object.__setattr__(self, "command", tuple(self.command))
        object.__setattr__(self, "out", Path(self.out))


@dataclass(frozen=True)
class Hooks:
    """Where a capture reports as it goes, each optional: `progress(line)` gets ncu's output
    lines, `expect(n)` how many launches ncu will profile, `on_plan(plan)` the sampling plan
    before ncu starts, `note(text)` notes."""

    progress: Callable[[str], None] | None = None
    expect: Callable[[int], None] | None = None
    on_plan: Callable[[object], None] | None = None
    note: Callable[[str], None] | None = None

    def say(self, text: str) -> None:
        if self.note:
            self.note(text)
