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

import json
import re
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from profkit.analyses.selection import NULL, id_span
from profkit.core import columns
from profkit.core.errors import ProfkitError
from profkit.core.intervals import segment_lengths
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
    # (start, end) of each comm kernel, by start then end: an (n, 2) int64 array
    collectives: np.ndarray = field(default_factory=lambda: np.zeros((0, 2), dtype=np.int64), repr=False)


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


def _rank(v: int) -> int | None:
    return None if v == NULL else int(v)


# the kernels profkit ranks reads: the `kernels` view's timeline ones with a start, from the table
# the view is made of (its per-row subqueries cost more than the analysis)
_KERNELS = "FROM launch_row WHERE +run = ? AND source != 'ncu' AND timeline_id IS NULL AND start_ns IS NOT NULL"


def _launches(store: Store, run: str) -> dict[str, np.ndarray]:
    """The run's kernels as columns: rank and pid (NULL: selection.NULL), NCCL or not (1/0),
    start, end (NULL: selection.NULL) and the launch call's start (none: the kernel's start).
    Whether a name is NCCL's is asked once per name (launch_name holds each once)."""
    comm = [i for i, name in store.conn.execute("SELECT id, name FROM launch_name") if is_comm(name)]
    ids = ", ".join(map(str, comm))
    flag = f"(name_id IN ({ids}) OR coalesce(short_id, name_id) IN ({ids}))" if comm else "0"
    within, at_most = id_span(store, "launch_row", run)
    n = NULL
    cols = store.int_columns(
        f"""
        SELECT coalesce(rank, {n}), coalesce(pid, {n}), {flag}, start_ns, coalesce(end_ns, {n}),
               coalesce(api_start_ns, start_ns)
        {_KERNELS} AND {within}""",
        (run,),
        6,
        at_most=at_most,
    )[0]
    return dict(zip(("rank", "pid", "comm", "start", "end", "launched"), cols))


def _rank_of_pid(procs: dict, pid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(which of `pid` are processes of `procs`, the rank of each of those)."""
    pids = np.fromiter(procs, dtype=np.int64, count=len(procs))
    order = np.argsort(pids)
    at = np.minimum(np.searchsorted(pids[order], pid), len(pids) - 1)
    known = pids[order][at] == pid
    return known, np.fromiter(procs.values(), dtype=np.int64, count=len(procs))[order][at[known]]


def _processes(store: Store, run: str, k: dict[str, np.ndarray]) -> dict | None:
    """{pid: rank} when the run is one report of several processes (`nsys profile torchrun
    --nproc-per-node 2`): each process with kernels is a rank, numbered by its GPU, then pid.
    None when the run's ranks come from its files (or it has one process)."""
    has = k["pid"] != NULL
    # (one file's rank for all: the launcher's recorded RANK, if any, is not its children's)
    if len(np.unique(k["pid"][has])) < 2 or len(np.unique(np.where(k["rank"][has] == NULL, -1, k["rank"][has]))) != 1:
        return None
    within, _ = id_span(store, "launch_row", run)
    rows = store.conn.execute(
        f"SELECT pid, min(device) {_KERNELS} AND {within} AND pid IS NOT NULL GROUP BY pid", (run,)
    ).fetchall()
    order = sorted(rows, key=lambda r: (-1 if r[1] is None else r[1], r[0]))
    return {r[0]: i for i, r in enumerate(order)}


def _steps(store: Store, run: str, pattern: str, procs: dict | None = None) -> tuple[dict, list[str]]:
    """(rank -> sorted [(start, end, name)] of the step ranges, notes).

    The steps are the outermost matching ranges: torch.profiler's `ProfilerStep#3` around the
    program's own `step 3` is one step, and what the outer one launched after the inner one
    closed (the optimizer) stays in it. A step that never closed (a capture stopped mid-step)
    is incomplete on that rank, so it is compared on none.

    The pattern is matched once per distinct range text (nvtx_path holds each text's paths),
    and only the matching ranges are read."""
    rx = re.compile(pattern, re.I)
    texts: dict[int, str] = {}
    matched: dict[str, bool] = {}
    for pid_, text in store.conn.execute("SELECT id, text FROM nvtx_path WHERE text IS NOT NULL"):
        if matched.setdefault(text, rx.search(text) is not None):
            texts[pid_] = text
    n = NULL
    rank, pid, path, start, end = store.int_columns(
        f"""
        SELECT coalesce(rank, {n}), coalesce(pid, {n}), path_id, start_ns, coalesce(end_ns, {n}) FROM nvtx_event
        WHERE run = ? AND path_id IN (SELECT value FROM json_each(?)) AND start_ns IS NOT NULL
        ORDER BY start_ns, end_ns IS NOT NULL, end_ns DESC, id""",
        (run, json.dumps(list(texts))),
        5,
    )[0]
    if procs is not None:
        keep, rank = _rank_of_pid(procs, pid)  # (not kept: a process that ran no kernel)
        path, start, end = path[keep], start[keep], end[keep]
    out: dict = {}
    unclosed: dict = {}
    codes, first, at = np.unique(rank, return_index=True, return_inverse=True)
    for code in np.argsort(first).tolist():  # the ranks in the order of their first step
        r, mine = codes[code], np.flatnonzero(at.reshape(-1) == code)
        s, e = start[mine], end[mine]
        # a step's successor: the first range starting at or after its end (the ones between
        # are nested in it or overlap it); a step that never closed has none
        after = np.maximum(np.searchsorted(s, e, side="left"), np.arange(1, len(s) + 1))
        seen: Counter = Counter()
        outer: list = []
        i = 0
        while i < len(s):
            text = texts[int(path[mine[i]])]
            seen[text] += 1
            name = text if seen[text] == 1 else f"{text} #{seen[text]}"
            if e[i] == NULL:
                outer.append((int(s[i]), None, name))
                unclosed.setdefault(name, []).append(_rank(r))
                break
            outer.append((int(s[i]), int(e[i]), name))
            i = int(after[i])
        out[_rank(r)] = outer
    for r in out:
        out[r] = [x for x in out[r] if x[2] not in unclosed]
    notes = [
        f"{name} never closed "
        + ("in the run" if rs == [None] else f"on rank {', '.join(map(str, rs))}")
        + " (a capture stopped mid-step): left out"
        for name, rs in unclosed.items()
    ]
    return out, notes


def analyse(store: Store, run: str | None = None, step_pattern: str = STEP_PATTERN) -> Ranks:
    """Column-at-a-time: each kernel's step by a binary search of its launch call in its rank's
    steps, and each (rank, step)'s unions by one sweep over its kernels sorted by start."""
    run = store.require_run(run)
    k = _launches(store, run)
    procs = _processes(store, run, k)
    try:
        steps, notes = _steps(store, run, step_pattern, procs)
    except re.error as e:
        raise ProfkitError(f"--steps: not a regular expression ({e})") from None
    if not len(k["start"]):
        raise ProfkitError(f"run {run!r} has no timeline (nsys or CUPTI) kernels: nothing to split by rank")
    rank = k["rank"]
    keep = k["end"] != NULL  # (a kernel that never ended covers no interval)
    if procs is not None:
        known, of_pid = _rank_of_pid(procs, k["pid"])
        keep &= known
        rank = np.full(len(rank), NULL, dtype=np.int64)
        rank[known] = of_pid
        notes.insert(
            0,
            f"one report of {len(procs)} processes: each is a rank ("
            + ", ".join(f"rank {i} = pid {pid}" for pid, i in procs.items())
            + ")",
        )
    rows = np.flatnonzero(keep)
    rank, start, end, launched = rank[rows], k["start"][rows], k["end"][rows], k["launched"][rows]
    comm = k["comm"][rows] != 0

    rank_codes, rank_at = columns.unique_inverse(rank)
    step, step_code = _step_of(rank_codes, rank_at, launched, steps)
    if not steps:
        notes.append(f"no NVTX range matches {step_pattern!r}: each rank's whole timeline is one step 'all'")
    per = _per_group(rank_at, rank_codes, step, step_code, start, end, comm)
    ranks = sorted({r for r, _ in per}, key=lambda r: -1 if r is None else r)
    step_names = _ordered_steps({s for _, s in per}, steps)

    offsets, residual = _clock_offsets(per, ranks, step_names)
    if offsets is None and len(ranks) > 1:
        notes.append("ranks ran different collectives: clocks not aligned, end/arrival skew left empty")
    per_step = []
    for name in step_names:
        here = [per[(r, name)] for r in ranks if (r, name) in per]
        quickest = min(x.comm_ns for x in here)
        for x in here:
            x.wait_ns = x.comm_ns - quickest
        row: dict[str, Any] = {
            "step": name,
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
            if min(len(x.collectives) for x in here):
                row["arrival_skew_ns"], row["latest_rank"] = _arrivals(here, offsets)
        per_step.append(row)

    per_rank = []
    slow_counts = Counter(r["slowest_rank"] for r in per_step if r["slowest_rank"] is not None)
    for r in ranks:
        mine = [per[(r, name)] for name in step_names if (r, name) in per]
        tot = {
            key: sum(getattr(x, key) for x in mine)
            for key in (
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
                "rank": r,
                "steps": len(mine),
                **tot,
                "slowest_in_steps": slow_counts.get(r, 0),
                "clock_offset_ns": None if offsets is None else offsets[r],
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


def _step_of(rank_codes, rank_at, launched, steps) -> tuple[np.ndarray, dict[str, int]]:
    """Each kernel's step, as a code (-1: launched outside every step of its rank: set-up,
    warm-up), and the step names' codes (numbered as met): the step whose range holds the
    kernel's launch call; 'all' on a rank without steps."""
    code: dict[str, int] = {}
    step = np.full(len(rank_at), -1, dtype=np.int64)
    for c, r in enumerate(rank_codes.tolist()):
        mine = np.flatnonzero(rank_at == c)
        rs = steps.get(_rank(r))
        if rs is None:
            step[mine] = code.setdefault("all", len(code))
            continue
        lo = np.array([x[0] for x in rs], dtype=np.int64)
        hi = np.array([x[1] for x in rs], dtype=np.int64)
        i = np.searchsorted(lo, launched[mine], side="right") - 1
        inside = i >= 0
        inside[inside] = launched[mine][inside] <= hi[i[inside]]
        own = np.array([code.setdefault(x[2], len(code)) for x in rs], dtype=np.int64)
        step[mine[inside]] = own[i[inside]]
    return step, code


def _per_group(rank_at, rank_codes, step, step_code, start, end, comm) -> dict:
    """{(rank, step): RankStep} of the kernels with a step (step code -1: none), each group's
    unions (all kernels, compute, communication) swept over its kernels sorted by start."""
    width = max(len(step_code), 1)
    inside = np.flatnonzero(step >= 0)
    group = rank_at[inside] * width + step[inside]
    order = columns.lex_order([start[inside], group])
    rows = inside[order]
    group, start, end, comm = group[order], start[rows], end[rows], comm[rows]
    first = np.flatnonzero(np.concatenate([[True], group[1:] != group[:-1]])) if len(group) else group[:0]
    keys = group[first]
    n = len(keys)
    kernels = np.diff(np.append(first, len(group)))
    busy = segment_lengths(first, start, end)
    comm_count = np.add.reduceat(comm.astype(np.int64), first) if n else np.zeros(0, dtype=np.int64)
    compute_ns, comm_ns = busy.copy(), np.zeros(n, dtype=np.int64)
    coll: dict[int, np.ndarray] = {}
    if comm.any():
        # the groups' compute and communication kernels apart, each still sorted by group, start
        for part, out in ((~comm, compute_ns), (comm, comm_ns)):
            rows = np.flatnonzero(part)
            g = group[rows]
            f = np.flatnonzero(np.concatenate([[True], g[1:] != g[:-1]])) if len(g) else g[:0]
            out[:] = 0
            out[np.searchsorted(keys, g[f])] = segment_lengths(f, start[rows], end[rows])
        rows = np.flatnonzero(comm)
        rows = rows[columns.lex_order([end[rows], start[rows], group[rows]])]  # by start, then end
        g = group[rows]
        cuts = np.flatnonzero(g[1:] != g[:-1]) + 1
        for key, part in zip(g[np.append(0, cuts)].tolist(), np.split(np.column_stack([start[rows], end[rows]]), cuts)):
            coll[key] = part
    lo = start[first] if n else start[:0]
    hi = np.maximum.reduceat(end, first) if n else end[:0]
    names = {c: s for s, c in step_code.items()}
    overlap = compute_ns + comm_ns - busy
    per = {}
    for j, key in enumerate(keys.tolist()):
        r, s = _rank(int(rank_codes[key // width])), names[key % width]
        window, cp, cm, ov = int(hi[j] - lo[j]), int(compute_ns[j]), int(comm_ns[j]), int(overlap[j])
        per[(r, s)] = RankStep(
            r,
            s,
            int(kernels[j]),
            int(comm_count[j]),
            int(lo[j]),
            int(hi[j]),
            window,
            cp,
            cm,
            ov,
            cm - ov,
            window - int(busy[j]),
            collectives=coll.get(key, np.zeros((0, 2), dtype=np.int64)),
        )
    return per


def _arrivals(here: list[RankStep], offsets: dict) -> tuple[int, int | None]:
    """(the largest spread of the start of the k-th collective of the step over the ranks, with
    their clocks aligned; the rank that arrived last most often: on a tie, the higher rank, and
    among ranks last equally often, the first one to be)."""
    n = min(len(x.collectives) for x in here)
    at = np.stack([x.collectives[:n, 0] - offsets[x.rank] for x in here])  # (rank, k)
    spread = int((at.max(axis=0) - at.min(axis=0)).max())
    key = np.array([-1 if x.rank is None else x.rank for x in here], dtype=np.int64)
    latest = np.where(at == at.max(axis=0), key[:, None], np.iinfo(np.int64).min).argmax(axis=0)
    counts = np.bincount(latest, minlength=len(here))
    first = np.full(len(here), n, dtype=np.int64)
    np.minimum.at(first, latest, np.arange(n))
    best = min(np.flatnonzero(counts == counts.max()).tolist(), key=lambda i: first[i])
    return spread, here[best].rank


def _clock_offsets(per, ranks, step_names):
    """({rank: offset_ns}, (residual_ns, collectives)) from the ends of the same collectives,
    or (None, None) where the ranks did not run the same collectives."""
    if len(ranks) < 2:
        return ({r: 0 for r in ranks}, (0, 0)) if ranks else (None, None)
    ends = {}
    for r in ranks:
        if any((r, s) not in per for s in step_names):
            return None, None
        ends[r] = np.concatenate([per[(r, s)].collectives[:, 1] for s in step_names])
    n = {len(v) for v in ends.values()}
    if len(n) != 1 or n == {0}:
        return None, None
    ref = ends[ranks[0]]
    offsets, residual = {}, 0
    for r in ranks:
        diffs = np.sort(ends[r] - ref)
        offsets[r] = int(diffs[len(diffs) // 2])
        residual = max(residual, int(np.abs(diffs - offsets[r]).max()))
    return offsets, (residual, len(ref))


def _ordered_steps(names: set[str], steps) -> list[str]:
    """Step names in time order of their first rank's range (numbers sort as numbers)."""
    first: dict = {}
    for rs in steps.values():
        for start, _, name in rs:
            first.setdefault(name, start)
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
