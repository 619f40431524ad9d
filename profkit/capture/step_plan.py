"""Which launches are step N, by launch index: what `profkit capture --step N` tells ncu.

ncu's NVTX filter reads the ranges of the launching thread only. An eager PyTorch training loop
pushes `step N` on its main thread while autograd launches the backward (and often the
optimizer) from a thread of its own, so `--nvtx-include "step N/"` measures the forward alone.
The store knows better: a launch on another thread takes the ranges its lead thread had open at
the launch call (profkit.store.inherit; the `kernels` view's `nvtx_path`). So the step's
launches are those whose path, so inherited, is under the step's range; ncu counts launches of a
process in API order across its threads, and the step is then a window of launch indexes:
`--launch-skip-before-match FIRST --launch-count COUNT` (core/sampling.py, Spec.launches).

Pure reading of a store (the timeline already loaded): capture loads its timeline into a
scratch store to plan, and the same plan can be checked on any stored run.
"""

from __future__ import annotations

from dataclasses import dataclass

from profkit.core.errors import BadArgument
from profkit.core.sampling import under_range
from profkit.store.store import Store


@dataclass
class StepWindow:
    step: str  # the step's range name
    pid: int | None  # the process whose launch index it is
    first: int  # launch index (API order, every thread of the process) of the step's first launch
    count: int  # launches from there to the step's last one, inclusive
    members: int  # of those, the step's own (by its inherited NVTX path)
    other_threads: int  # members launched by another thread than the one that pushed the step
    others: int  # launches in the window that are not the step's (another thread's, outside it)

    def describe(self) -> str:
        missed = (
            f"; {self.other_threads:,} of them from another thread than the step's (autograd's backward): "
            "an NVTX filter would miss them"
            if self.other_threads
            else ""
        )
        extra = f"; {self.others:,} launches of other work interleaved with it are profiled too" if self.others else ""
        return (
            f"{self.step}: launches {self.first:,} to {self.first + self.count - 1:,} of the process "
            f"({self.members:,} of the step{missed}{extra})"
        )


def step_window(store: Store, run: str, step: str) -> StepWindow:
    """The launch-index window of range `step` (a name, e.g. 'step 5') in a stored timeline."""
    src = store.timeline_source(run)
    rows = store.conn.execute(
        "SELECT k.nvtx_path, coalesce(k.nvtx_inherited, 0), l.pid FROM kernels k JOIN launch_row l ON l.id = k.kernel_id "
        "WHERE k.run = ? AND l.source = ? AND l.timeline_id IS NULL AND l.api_start_ns IS NOT NULL "
        "ORDER BY l.pid, l.api_start_ns, l.id",
        (run, src),
    ).fetchall()
    mine = [i for i, r in enumerate(rows) if under_range(r[0], step)]
    if not mine:
        raise BadArgument(f"--step: no launch of the timeline is inside the range {step!r}")
    pid = rows[mine[0]][2]
    start = next(i for i, r in enumerate(rows) if r[2] == pid)  # this process's first launch
    a, b = mine[0], mine[-1]
    if rows[b][2] != pid:
        raise BadArgument(f"--step: the range {step!r} holds launches of several processes; name one with --range")
    members = len(mine)
    return StepWindow(
        step,
        pid,
        a - start,
        b - a + 1,
        members,
        sum(1 for i in mine if rows[i][1]),
        b - a + 1 - members,
    )
