"""Per-rank analysis of a multi-process run: communication against compute, and stragglers.

NCCL kernels are communication (profkit.core.names.is_comm), every other kernel compute. For each rank and
each step (an NVTX range whose text matches STEP_PATTERN: `step 3`, `ProfilerStep#3`), on the GPU timeline:

- window: from the first start to the last end of the kernels the step launched (a kernel
  belongs to the step whose range holds its launch call, whatever thread launched it);
- compute_ns / comm_ns: length of the union of compute / communication kernel intervals
  (all streams of the rank merged, so concurrent kernels count once);
- overlap_ns: communication hidden under compute (intersection of the two unions);
  exposed_comm_ns = comm_ns - overlap_ns;
- idle_ns: window minus the union of all kernels (the GPU ran nothing of this step);
- wait_ns: comm_ns minus the smallest comm_ns of any rank in that step. A collective lasts
  until the last rank arrives, so a rank's extra communication time over the quickest rank's
  is time spent waiting for the others. It needs no common clock.

Stragglers: the slowest rank of a step is the one that waited least (the others waited for
it); `wait_skew_ns` is the largest wait in the step. The run's slowest rank is the one slowest
in most steps.

Clocks: each rank's report has its own time base (two nsys sessions on one H200 host were
19.8 ms and 37.8 ms apart, constant to a few microseconds), so timestamps are aligned before
they are compared across ranks. A collective ends on every rank at once (each waits for the
last), so a rank's clock offset is the median, over all its collectives, of the difference
between its end and the first rank's end of the same (k-th) collective; `residual_ns` is the
largest disagreement left after that. With offsets applied, `end_skew_ns` is the spread of the
step's last kernel end and `arrival_skew_ns` the largest spread of the start of the k-th
collective of the step (the latest arrival is `latest_rank`). Without the same collectives on
every rank, no offset is applied and those columns are left empty.
"""

from __future__ import annotations

import bisect
import re
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from typing import Any

from profkit.core.errors import ProfkitError
from profkit.core.intervals import intersection, length, union
from profkit.core.names import is_comm
from profkit.store.store import Store

STEP_PATTERN = r"^(profiler)?step[ _#:-]*\d+$"  # `step 3`; torch.profiler's `ProfilerStep#3`


@dataclass
class RankStep:
    rank: int | None
    step: str
    kernels: int
    comm_kernels: int
    start_ns: int
    end_ns: int
    window_ns: int
    compute_ns: int
    comm_ns: int
    overlap_ns: int
    exposed_comm_ns: int
    idle_ns: int
    wait_ns: int = 0
    collectives: list = field(default_factory=list, repr=False)  # (start, end) of each comm kernel


@dataclass
class Ranks:
    run: str
    ranks: list
    steps: list[str]
    per_rank_step: list[RankStep]
    per_step: list[dict]
    per_rank: list[dict]
    slowest_rank: int | None
    notes: list[str]

    def as_dict(self) -> dict:
        d = asdict(self)
        for r in d["per_rank_step"]:
            r.pop("collectives")
        return d


def _processes(store: Store, run: str) -> dict | None:
    """{pid: rank} when the run is one report of several processes (`nsys profile torchrun
    --nproc-per-node 2`): each process with kernels is a rank, numbered by its GPU, then pid.
    None when the run's ranks come from its files (or it has one process)."""
    rows = store.conn.execute(
        "SELECT pid, min(device), count(DISTINCT coalesce(rank, -1)), min(coalesce(rank, -1)) FROM kernels"
        " WHERE run = ? AND source != 'ncu' AND start_ns IS NOT NULL AND pid IS NOT NULL GROUP BY pid",
        (run,),
    ).fetchall()
    # (one file's rank for all: the launcher's recorded RANK, if any, is not its children's)
    if len(rows) < 2 or any(n != 1 for _, _, n, _ in rows) or len({r for *_, r in rows}) != 1:
        return None
    order = sorted(rows, key=lambda r: (-1 if r[1] is None else r[1], r[0]))
    return {r[0]: i for i, r in enumerate(order)}


def _steps(store: Store, run: str, pattern: str, procs: dict | None = None) -> tuple[dict, list[str]]:
    """(rank -> sorted [(start, end, name)] of the step ranges, notes).

    The steps are the outermost matching ranges: torch.profiler's `ProfilerStep#3` around the
    program's own `step 3` is one step, and what the outer one launched after the inner one
    closed (the optimizer) stays in it. A step that never closed (a capture stopped mid-step)
    is incomplete on that rank, so it is compared on none."""
    rx = re.compile(pattern, re.I)
    found: dict = defaultdict(list)
    for rank, pid, text, start, end in store.conn.execute(
        "SELECT rank, pid, text, start_ns, end_ns FROM nvtx_range"
        " WHERE run = ? AND text IS NOT NULL AND start_ns IS NOT NULL"
        " ORDER BY start_ns, end_ns IS NOT NULL, end_ns DESC",
        (run,),
    ):
        if procs is not None:
            if pid not in procs:
                continue  # a process that ran no kernel
            rank = procs[pid]
        if rx.search(text):
            found[rank].append((start, end, text))
    out: dict = {}
    unclosed: dict = defaultdict(list)
    for rank, rs in found.items():
        seen: Counter = Counter()
        outer: list = []
        reach = None  # end of the outermost step open so far (None: it never closed)
        for start, end, text in rs:
            if outer and (reach is None or start < reach):
                continue  # nested in the step before it
            reach = end
            seen[text] += 1
            outer.append((start, end, text if seen[text] == 1 else f"{text} #{seen[text]}"))
        out[rank] = outer
        for _, end, name in outer:
            if end is None:
                unclosed[name].append(rank)
    for rank in out:
        out[rank] = [r for r in out[rank] if r[2] not in unclosed]
    notes = [
        f"{name} never closed "
        + ("in the run" if rs == [None] else f"on rank {', '.join(map(str, rs))}")
        + " (a capture stopped mid-step): left out"
        for name, rs in unclosed.items()
    ]
    return out, notes


def analyse(store: Store, run: str | None = None, step_pattern: str = STEP_PATTERN) -> Ranks:
    run = store.require_run(run)
    procs = _processes(store, run)
    try:
        steps, notes = _steps(store, run, step_pattern, procs)
    except re.error as e:
        raise ProfkitError(f"--steps: not a regular expression ({e})") from None
    rows = store.conn.execute(
        "SELECT rank, short_name, kernel_name, start_ns, end_ns, coalesce(api_start_ns, start_ns), pid FROM kernels"
        " WHERE run = ? AND source != 'ncu' AND start_ns IS NOT NULL ORDER BY start_ns",
        (run,),
    ).fetchall()
    if not rows:
        raise ProfkitError(f"run {run!r} has no timeline (nsys or CUPTI) kernels: nothing to split by rank")
    if procs is not None:
        rows = [(procs[r[6]],) + r[1:] for r in rows if r[6] in procs]
        notes.insert(
            0,
            f"one report of {len(procs)} processes: each is a rank ("
            + ", ".join(f"rank {i} = pid {pid}" for pid, i in procs.items())
            + ")",
        )
    groups: dict = defaultdict(list)  # (rank, step) -> kernels
    starts = {rank: [s[0] for s in rs] for rank, rs in steps.items()}
    for rank, short, name, start, end, launched, _ in rows:
        rs = steps.get(rank)
        if rs is None:
            step = "all"
        else:
            i = bisect.bisect_right(starts[rank], launched) - 1
            if i < 0 or launched > rs[i][1]:
                continue  # launched outside every step (set-up, warm-up)
            step = rs[i][2]
        groups[(rank, step)].append((start, end, is_comm(short) or is_comm(name)))
    if not steps:
        notes.append(f"no NVTX range matches {step_pattern!r}: each rank's whole timeline is one step 'all'")
    ranks = sorted({k[0] for k in groups}, key=lambda r: -1 if r is None else r)
    step_names = _ordered_steps(groups, steps)

    per = {}
    for (rank, step), ks in groups.items():
        comp = union((s, e) for s, e, c in ks if not c)
        comm = union((s, e) for s, e, c in ks if c)
        start, end = min(k[0] for k in ks), max(k[1] for k in ks)
        ov = intersection(comp, comm)
        busy = length(comp) + length(comm) - ov
        per[(rank, step)] = RankStep(
            rank,
            step,
            len(ks),
            sum(1 for k in ks if k[2]),
            start,
            end,
            end - start,
            length(comp),
            length(comm),
            ov,
            length(comm) - ov,
            end - start - busy,
            collectives=sorted((s, e) for s, e, c in ks if c),
        )

    offsets, residual = _clock_offsets(per, ranks, step_names)
    if offsets is None and len(ranks) > 1:
        notes.append("ranks ran different collectives: clocks not aligned, end/arrival skew left empty")
    per_step = []
    for step in step_names:
        here = [per[(r, step)] for r in ranks if (r, step) in per]
        quickest = min(x.comm_ns for x in here)
        for x in here:
            x.wait_ns = x.comm_ns - quickest
        row: dict[str, Any] = {
            "step": step,
            "ranks": len(here),
            "slowest_rank": None,
            "wait_skew_ns": max(x.wait_ns for x in here),
            "end_skew_ns": None,
            "arrival_skew_ns": None,
            "latest_rank": None,
        }
        if len(here) > 1 and any(x.comm_ns for x in here):
            row["slowest_rank"] = min(here, key=lambda x: (x.wait_ns, -x.compute_ns - x.idle_ns)).rank
        if offsets is not None and len(here) > 1:
            ends = [x.end_ns - offsets[x.rank] for x in here]
            row["end_skew_ns"] = max(ends) - min(ends)
            n = len(here[0].collectives)
            if n:
                late: Counter[int | None] = Counter()
                spreads = []
                for k in range(n):
                    arrivals = [(x.collectives[k][0] - offsets[x.rank], x.rank) for x in here]
                    spreads.append(max(arrivals)[0] - min(arrivals)[0])
                    late[max(arrivals)[1]] += 1
                row["arrival_skew_ns"] = max(spreads)
                row["latest_rank"] = late.most_common(1)[0][0]
        per_step.append(row)

    per_rank = []
    slow_counts = Counter(r["slowest_rank"] for r in per_step if r["slowest_rank"] is not None)
    for rank in ranks:
        mine = [per[(rank, s)] for s in step_names if (rank, s) in per]
        tot = {
            k: sum(getattr(x, k) for x in mine)
            for k in (
                "kernels",
                "comm_kernels",
                "window_ns",
                "compute_ns",
                "comm_ns",
                "overlap_ns",
                "exposed_comm_ns",
                "idle_ns",
                "wait_ns",
            )
        }
        tot["hidden_comm_pct"] = 100.0 * tot["overlap_ns"] / tot["comm_ns"] if tot["comm_ns"] else None
        per_rank.append(
            {
                "rank": rank,
                "steps": len(mine),
                **tot,
                "slowest_in_steps": slow_counts.get(rank, 0),
                "clock_offset_ns": None if offsets is None else offsets[rank],
            }
        )
    slowest: int | None = None
    if slow_counts:
        wait = {r["rank"]: r["wait_ns"] for r in per_rank}
        slowest = max(slow_counts, key=lambda r: (slow_counts[r], -wait[r]))
    if len(ranks) == 1:
        notes.append("one rank only: no straggler to find")
    elif offsets is not None:
        notes.append(
            f"clocks aligned on the ends of {residual[1]} collectives per rank; largest residual "
            f"{residual[0] / 1e3:.1f} us"
        )
    return Ranks(
        run,
        ranks,
        step_names,
        [per[(r, s)] for s in step_names for r in ranks if (r, s) in per],
        per_step,
        per_rank,
        slowest,
        notes,
    )


def _clock_offsets(per, ranks, step_names):
    """({rank: offset_ns}, (residual_ns, collectives)) from the ends of the same collectives,
    or (None, None) where the ranks did not run the same collectives."""
    if len(ranks) < 2:
        return ({r: 0 for r in ranks}, (0, 0)) if ranks else (None, None)
    seqs = {}
    for r in ranks:
        if any((r, s) not in per for s in step_names):
            return None, None
        seqs[r] = [c for s in step_names for c in per[(r, s)].collectives]
    n = {len(v) for v in seqs.values()}
    if len(n) != 1 or n == {0}:
        return None, None
    ref = seqs[ranks[0]]
    offsets, residual = {}, 0
    for r in ranks:
        diffs = sorted(c[1] - c0[1] for c, c0 in zip(seqs[r], ref))
        offsets[r] = diffs[len(diffs) // 2]
        residual = max(residual, max(abs(d - offsets[r]) for d in diffs))
    return offsets, (residual, len(ref))


def _ordered_steps(groups, steps) -> list[str]:
    """Step names in time order of their first rank's range (numbers sort as numbers)."""
    first: dict = {}
    for rs in steps.values():
        for start, _, name in rs:
            first.setdefault(name, start)
    names = {k[1] for k in groups}
    return sorted(names, key=lambda n: (first.get(n, 0), n))


# --- output (reads the result only) -------------------------------------------------------------


def table_rows(r: Ranks) -> list[dict]:
    return [
        {
            "step": x.step,
            "rank": x.rank,
            "kernels": x.kernels,
            "nccl": x.comm_kernels,
            "window_us": x.window_ns / 1e3,
            "compute_us": x.compute_ns / 1e3,
            "comm_us": x.comm_ns / 1e3,
            "hidden_us": x.overlap_ns / 1e3,
            "exposed_us": x.exposed_comm_ns / 1e3,
            "idle_us": x.idle_ns / 1e3,
            "wait_us": x.wait_ns / 1e3,
        }
        for x in r.per_rank_step
    ]


def multi_rank(store: Store, run: str) -> bool:
    """Whether the run's kernels come from more than one process rank."""
    return len(store.query("SELECT DISTINCT rank FROM kernels WHERE run = ? AND rank IS NOT NULL", (run,))) > 1
