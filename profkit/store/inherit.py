"""Launches on worker threads take the ranges of their process's lead thread.

NVTX push/pop ranges (and torch.profiler's record_function ranges) are per thread. An eager
PyTorch training loop pushes `step N` on its main thread, but autograd runs the backward (and
often the optimizer's foreach kernels) on a worker thread of its own: by the launching thread's
ranges alone, a step holds only its forward. A launch on another thread than its process's
**lead thread** is placed under the ranges open on the lead thread at its launch call, followed
by its own thread's ranges open then (a backward kernel launched inside CUB's own NVTX range
`cub::DeviceRadixSort` is `step 3/cub::DeviceRadixSort`), and marked inherited
(`launch_inherit`; the `kernels` view shows that path, `nvtx_inherited` and `nvtx_tid`, the lead
thread). Where the lead thread has no push/pop range open, the launch keeps its own path.

The lead thread of a process is the one whose push/pop ranges cover the most time (its outermost
ranges' spans, an unclosed range up to the last range event of the file): the thread that
annotates the program's structure (a training loop's steps, a server's requests), not one that
pushes many short ranges (a data loader's, a library's around its calls). Ties: more ranges,
then the smaller thread id, so the choice never depends on the order rows were read.

The launch's own path stays in `launch`: ncu records NVTX per thread too, so linking ncu
launches to the timeline (store/link.py) and capture's `--nvtx-include` prediction
(core/sampling.py) read the launching thread's own ranges.
"""

from __future__ import annotations

import json
import sqlite3

from profkit.core.nvtx import I64_MAX, Nesting
from profkit.store.ids import path_ids


def lead_threads(rows) -> dict:
    """pid -> the lead thread's tid, from (pid, tid, time its outermost ranges span, ranges)."""
    lead: dict = {}
    for pid, tid, _, _ in sorted(
        rows, key=lambda r: (-r[2], -r[3], (0, r[1], "") if isinstance(r[1], int) else (1, 0, str(r[1])))
    ):
        lead.setdefault(pid, tid)
    return lead


def _coverage(conn: sqlite3.Connection, file_id: int) -> list[tuple]:
    """(pid, tid, time spanned, ranges) of each thread with push/pop ranges: the outermost ones
    (depth 0: they do not overlap on one thread) summed, an unclosed one up to the file's last
    range event. One aggregate in SQL: the ranges of a large file are never read into Python
    unless some launch needs them."""
    return conn.execute(
        """
        SELECT e.pid, e.tid,
               sum(CASE WHEN p.depth = 0 THEN coalesce(e.end_ns, h.t) - e.start_ns ELSE 0 END), count(*)
        FROM nvtx_event e JOIN nvtx_path p ON p.id = e.path_id,
             (SELECT max(max(start_ns), coalesce(max(end_ns), 0)) AS t FROM nvtx_event WHERE file_id = ?) h
        WHERE e.file_id = ? AND e.kind = 'push_pop' AND e.start_ns IS NOT NULL AND e.pid IS NOT NULL
          AND e.tid IS NOT NULL
        GROUP BY e.pid, e.tid""",
        (file_id, file_id),
    ).fetchall()


def _leads(conn: sqlite3.Connection, file_id: int) -> dict:
    """pid -> lead thread, for the processes where a launch comes from another thread than the
    lead. The threads that launch and those with ranges first (two scans): a file whose only
    thread with ranges launches everything (a lab run, most traces) needs no more."""
    ranged: dict = {}
    for pid, tid in conn.execute(
        "SELECT DISTINCT pid, tid FROM nvtx_event WHERE file_id = ? AND kind = 'push_pop' AND pid IS NOT NULL "
        "AND tid IS NOT NULL AND start_ns IS NOT NULL",
        (file_id,),
    ):
        ranged.setdefault(pid, set()).add(tid)
    launching: dict = {}
    for pid, tid in conn.execute(
        "SELECT DISTINCT pid, tid FROM launch_row WHERE file_id = ? AND timeline_id IS NULL AND source != 'ncu' "
        "AND api_start_ns IS NOT NULL AND tid IS NOT NULL",
        (file_id,),
    ):
        if pid in ranged:
            launching.setdefault(pid, set()).add(tid)
    if not any(len(ranged[p]) > 1 or ts - ranged[p] for p, ts in launching.items()):
        return {}
    lead = lead_threads(_coverage(conn, file_id))
    return {p: t for p, t in lead.items() if launching.get(p, set()) - {t}}


def add(conn: sqlite3.Connection, file_id: int) -> int:
    """Write the inherited paths of one file's timeline launches; returns how many inherit."""
    import numpy as np

    lead = _leads(conn, file_id)
    if not lead:
        return 0
    # launches of the processes with a lead thread, on another thread
    other = " OR ".join("(pid = ? AND tid IS NOT ?)" for _ in lead)
    calls = conn.execute(
        "SELECT id, pid, tid, api_start_ns, path_id FROM launch_row WHERE file_id = ? AND timeline_id IS NULL "
        f"AND source != 'ncu' AND api_start_ns IS NOT NULL AND tid IS NOT NULL AND ({other}) ORDER BY id",
        (file_id, *(x for kv in lead.items() for x in kv)),
    ).fetchall()
    if not calls:
        return 0
    ev = conn.execute(
        "SELECT pid, tid, kind, start_ns, end_ns, path_id FROM nvtx_event WHERE file_id = ? "
        "AND start_ns IS NOT NULL AND path_id IS NOT NULL AND pid IS NOT NULL ORDER BY id",
        (file_id,),
    ).fetchall()
    # keys: threads and processes as int64 (kineto may write them as text)
    threads: dict = {}
    procs: dict = {}

    def tkey(pid, tid) -> int:
        return threads.setdefault((pid, tid), len(threads))

    def pkey(pid) -> int:
        return procs.setdefault(pid, len(procs))

    # each range's own name: the last of its path's names
    own_name = {
        i: json.loads(js)[-1]
        for i, js in conn.execute(
            "SELECT id, names FROM nvtx_path WHERE id IN (SELECT DISTINCT path_id FROM nvtx_event WHERE file_id = ?)",
            (file_id,),
        )
    }
    names: list = []
    name_ix: dict = {}
    r_thread, r_pid, r_start, r_end, r_name, r_pp = [], [], [], [], [], []
    for pid, tid, kind, s, e, path in ev:
        nm = own_name[path]
        r_name.append(name_ix.setdefault(nm, len(names)))
        if len(names) < len(name_ix):
            names.append(nm)
        pp = kind == "push_pop"
        r_thread.append(tkey(pid, tid) if pp else -1)  # a start/end range nests with no thread
        r_pid.append(pkey(pid))
        r_start.append(s)
        r_end.append(I64_MAX if e is None else e)
        r_pp.append(pp)
    r_pp_a = np.asarray(r_pp, dtype=bool)
    c_own = np.asarray([tkey(c[1], c[2]) for c in calls], dtype=np.int64)
    c_lead = np.asarray([tkey(c[1], lead[c[1]]) for c in calls], dtype=np.int64)
    c_pid = np.asarray([pkey(c[1]) for c in calls], dtype=np.int64)
    c_time = np.asarray([c[3] for c in calls], dtype=np.int64)
    th, rp, rs, re_, rn = (np.asarray(x, dtype=np.int64) for x in (r_thread, r_pid, r_start, r_end, r_name))
    # the own thread's push/pop ranges open at the call (start/end ranges left out: the lead's
    # path holds those of the process)
    k = np.flatnonzero(r_pp_a)
    own_nest = Nesting(names, th[k], rp[k], rs[k], re_[k], rn[k], r_pp_a[k])
    own = own_nest.place(c_own, c_pid, c_time)
    nest = Nesting(names, th, rp, rs, re_, rn, r_pp_a)
    got = nest.place(c_lead, c_pid, c_time)
    # only where the lead thread has a push/pop range open (start/end ranges hold the own path already)
    has = np.flatnonzero((got >= 0) & (own_nest.place(c_lead, c_pid, c_time) >= 0))
    # a run's launches share a few (lead path, own path) pairs: each made and looked up once
    pairs = sorted({(int(got[j]), int(own[j])) for j in has.tolist()})
    made = [nest.paths[g] + (own_nest.paths[o] if o >= 0 else ()) for g, o in pairs]
    store_id = dict(zip(pairs, path_ids(conn, made)))
    rows = []
    for j in has.tolist():
        c = calls[j]
        path = store_id[(int(got[j]), int(own[j]))]
        if path != c[4]:
            rows.append((c[0], path, lead[c[1]]))
    conn.executemany("INSERT INTO launch_inherit (launch_id, path_id, tid) VALUES (?, ?, ?)", rows)
    return len(rows)


def backfill(conn: sqlite3.Connection) -> None:
    """Inherited paths of every file already loaded (a store migrated to launch_inherit)."""
    for (file_id,) in conn.execute(
        "SELECT DISTINCT file_id FROM nvtx_event WHERE kind = 'push_pop' ORDER BY file_id"
    ).fetchall():
        add(conn, file_id)
