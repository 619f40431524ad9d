"""Sampled-launch linking: each ncu launch tied to the timeline launch it profiled, and each
timeline launch without counters of its own pointed at its measured sibling. Runs inside the
transaction of every report's load (profkit.store.write.add_report).
"""

from __future__ import annotations

import json
import sqlite3

from profkit.core import sampling
from profkit.store.read import timeline_source


def link(conn: sqlite3.Connection, run: str) -> None:
    """Tie each ncu launch to the timeline launch it profiled, within its rank.

    The k-th ncu launch of kernel S under NVTX path P is the k-th timeline launch of S
    under P (ncu and the timeline ran the same deterministic workload); the path keeps
    a step's kernels apart from the same kernels in other steps. Launches left over
    then pair by innermost range alone (the tools may order a path's start/end and
    push/pop ranges differently), then by the longest path prefix the timeline has:
    ncu can report a range that nsys saw closed (NCCL's ncclCommInitRankConfig stayed
    open on the main thread in ncu 2025.3, seen on an H200 pair), one extra innermost
    range. nsys wins over the CUPTI tracer when a run has both.
    """
    if not conn.execute("SELECT 1 FROM launch WHERE run = ? AND source = 'ncu' LIMIT 1", (run,)).fetchone():
        return  # no ncu launch to tie (a run's timeline loads first): nothing changes below
    conn.execute("UPDATE launch_row SET timeline_id = NULL WHERE run = ? AND source = 'ncu'", (run,))
    tl = timeline_source(conn, run)
    if not tl:
        return
    timeline = (tl,)
    sampled = _sampled_files(conn, run)
    # the timeline's launches of each rank, read once for both passes (the links below change
    # only the ncu launches' timeline_id, none of the fields read)
    read: dict = {}
    if sampled:
        _link_sampled(conn, run, tl, sampled, read)
    skip = f" AND file_id NOT IN ({','.join(str(f) for f in sampled)})" if sampled else ""
    for key in ("nvtx_path", "nvtx_range"):
        conn.execute(
            f"""
            WITH t AS (SELECT id, rank, {key} AS r, short_name,
                              row_number() OVER (PARTITION BY rank, {key}, short_name ORDER BY start_ns, seq) AS k
                       FROM launch l WHERE run = :run AND source = :tl AND id NOT IN
                           (SELECT timeline_id FROM launch x WHERE x.run = :run AND x.source = 'ncu'
                            AND x.timeline_id IS NOT NULL)),
                 n AS (SELECT id, rank, {key} AS r, short_name,
                              row_number() OVER (PARTITION BY rank, {key}, short_name ORDER BY file_id, seq) AS k
                       FROM launch WHERE run = :run AND source = 'ncu' AND timeline_id IS NULL{skip}),
                 m AS (SELECT n.id AS nid, t.id AS tid FROM n JOIN t
                       ON t.short_name = n.short_name AND t.r IS n.r AND t.rank IS n.rank AND t.k = n.k)
            UPDATE launch_row SET timeline_id = (SELECT tid FROM m WHERE nid = launch_row.id)
            WHERE run = :run AND source = 'ncu' AND timeline_id IS NULL{skip}""",
            {"run": run, "tl": timeline[0]},
        )
    _link_by_prefix(conn, run, timeline[0], skip)
    if sampled:
        _link_siblings(conn, run, tl, read)


def _sampled_files(conn: sqlite3.Connection, run: str) -> dict[int, sampling.Spec]:
    """ncu reports of the run that `profkit capture` sampled: {file_id: what ncu was told}."""
    out = {}
    for fid, facts in conn.execute(
        "SELECT id, facts FROM report_file WHERE run = ? AND facts LIKE '%ncu_filter%'", (run,)
    ):
        spec = json.loads(facts or "{}").get("ncu_filter")
        if isinstance(spec, dict):
            out[fid] = sampling.Spec.from_dict(spec)
    return out


def _rows(conn: sqlite3.Connection, where: str, params) -> tuple[list[int], list[tuple]]:
    got = conn.execute(
        f"SELECT id, {', '.join(sampling.FIELDS)} FROM launch WHERE {where} ORDER BY id", params
    ).fetchall()
    return [r[0] for r in got], [r[1:] for r in got]


def _timeline_rows(conn: sqlite3.Connection, run: str, tl: str, rank, read: dict) -> tuple[list[int], list[tuple]]:
    if rank not in read:
        read[rank] = _rows(conn, "run = ? AND source = ? AND rank IS ?", (run, tl, rank))
    return read[rank]


def _link_sampled(conn: sqlite3.Connection, run: str, tl: str, files: dict[int, sampling.Spec], read: dict) -> None:
    """A sampled report's launches pair with the timeline launches the same sampling rule
    picks on the timeline (profkit.core.sampling.pairs), within each rank."""
    for fid, spec in files.items():
        nids, nrows = _rows(conn, "file_id = ? AND source = 'ncu'", (fid,))
        rank = conn.execute("SELECT rank FROM report_file WHERE id = ?", (fid,)).fetchone()[0]
        tids, trows = _timeline_rows(conn, run, tl, rank, read)
        conn.executemany(
            "UPDATE launch_row SET timeline_id = ? WHERE id = ?",
            [(tids[t], nids[n]) for n, t in sampling.pairs(trows, nrows, spec)],
        )


def _link_siblings(conn: sqlite3.Connection, run: str, tl: str, read: dict) -> None:
    """Each timeline launch without counters of its own points at the measured launch of the
    same kernel and configuration (sampled_from): classify labels it from those counters."""
    conn.execute("UPDATE launch_row SET sampled_from = NULL WHERE run = ?", (run,))
    for (rank,) in conn.execute("SELECT DISTINCT rank FROM launch WHERE run = ? AND source = ?", (run, tl)).fetchall():
        tids, trows = _timeline_rows(conn, run, tl, rank, read)
        at = {t: i for i, t in enumerate(tids)}
        measured = {
            at[t]
            for (t,) in conn.execute(
                "SELECT DISTINCT timeline_id FROM launch WHERE run = ? AND source = 'ncu' AND timeline_id IS NOT NULL"
                " AND rank IS ?",
                (run, rank),
            )
            if t in at
        }
        conn.executemany(
            "UPDATE launch_row SET sampled_from = ? WHERE id = ?",
            [(tids[m], tids[i]) for i, m in sampling.siblings(trows, measured).items()],
        )


def _link_by_prefix(conn: sqlite3.Connection, run: str, tl: str, skip: str = "") -> None:
    left = conn.execute(
        "SELECT id, rank, nvtx_path, short_name FROM launch WHERE run = ? AND source = 'ncu'"
        f" AND timeline_id IS NULL AND nvtx_path LIKE '%/%'{skip} ORDER BY file_id, seq",
        (run,),
    ).fetchall()
    if not left:
        return
    free: dict = {}
    for tid, rank, path, short in conn.execute(
        "SELECT id, rank, nvtx_path, short_name FROM launch l WHERE run = ? AND source = ? AND id NOT IN"
        " (SELECT timeline_id FROM launch x WHERE x.run = l.run AND x.source = 'ncu' AND x.timeline_id IS NOT NULL)"
        " ORDER BY start_ns, seq",
        (run, tl),
    ):
        free.setdefault((rank, path, short), []).append(tid)
    pairs = []
    for nid, rank, path, short in left:
        while "/" in path:
            path = path.rsplit("/", 1)[0]
            todo = free.get((rank, path, short))
            if todo:
                pairs.append((todo.pop(0), nid))
                break
    conn.executemany("UPDATE launch_row SET timeline_id = ? WHERE id = ?", pairs)
