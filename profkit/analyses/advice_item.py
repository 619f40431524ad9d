"""One advise item (profkit/analyses/advise.py ranks them): its figures and how they were
computed. Apart from advise so the item kinds built elsewhere (profkit/analyses/idle_advice.py)
share it without importing advise."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

# gaps between kernels longer than this are host work (data loading, a sync, start-up), not launches
LAUNCH_GAP_NS = 1_000_000


@dataclass
class Item:
    kind: str  # range | graph | idle (idle time a graph keeps: profkit.analyses.idle_advice) | switch (attention in pieces)
    nvtx_path: str | None
    kernel_name: str  # the kernels it covers (short names, most time first)
    label: str | None  # the label holding most of its GPU time
    calls: int
    launches: int
    gpu_ns: float  # GPU time of the item over all its calls
    window_ns: float | None  # wall (GPU window) of the item over all calls, where a timeline has it
    recoverable_ns: float
    floor_ns: float | None  # GPU time (range) or window (graph) per call after the fix
    how: str  # how recoverable_ns was computed
    action: str  # the next step
    evidence: list[dict] = field(default_factory=list)
    ncu_speedup_pct: float | None = None  # ncu's own estimate, where the report carries rule results
    share_gpu: float = 0.0  # of the scope's GPU time
    share_wall: float | None = None  # of the scope's wall time
    rank: int = 0
    family: str | None = None  # the kernel family holding most of its GPU time (profkit.model.families)
    predicted_speedup: float | None = None  # attainable: the roof bounded by the family and ncu (ranked by)
    predicted_how: str = ""  # what bounded predicted_speedup
    roof_recoverable_ns: float = 0.0  # recoverable at the roof (recoverable_ns: at the attainable figure)

    @property
    def per_call_ns(self) -> float:
        span = self.window_ns if self.kind in ("graph", "idle") else self.gpu_ns
        assert span is not None  # graph and idle items are made from a timeline window, never without one
        return span / max(self.calls, 1)

    @property
    def roof_speedup(self) -> float | None:
        """The item's own time per call now over its floor (window for graph items): the headroom
        to the roof."""
        if self.floor_ns is None or self.floor_ns <= 0:
            return None
        return self.per_call_ns / self.floor_ns

    def row(self) -> dict:
        d = asdict(self)
        d["roof_speedup"] = self.roof_speedup
        return d
