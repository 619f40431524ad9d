"""Reading the store: runs, their meta, rows as dicts, counters, the timeline's source.

Plain functions of a connection; profkit.store.store.Store answers through them (and
through profkit.store.snapshot's caches where a caller asked for them).
"""

from __future__ import annotations

import json
import sqlite3

from profkit.core.errors import NoSuchRun
from profkit.core.metrics import Counters
from profkit.parsers import timeline_sources


def has_file(conn: sqlite3.Connection, sha256: str) -> tuple[str, str] | None:
    row = conn.execute("SELECT run, path FROM report_file WHERE sha256 = ?", (sha256,)).fetchone()
    return tuple(row) if row else None


def runs(conn: sqlite3.Connection) -> list[str]:
    return [r[0] for r in conn.execute("SELECT run FROM run ORDER BY created_at, run")]


def require_run(conn: sqlite3.Connection, path: str, run: str | None) -> str:
    """`run`, or the latest run when None; one line naming the runs if there is no such run."""
    have = runs(conn)
    if not have:
        raise NoSuchRun(f"{path}: no runs loaded yet (profkit ingest FILE...)")
    if run is None:
        return have[-1]
    if run not in have:
        raise NoSuchRun(f"{path}: no run named {run!r}; runs: {', '.join(have)}")
    return run


def query(conn: sqlite3.Connection, sql: str, params=()) -> list[dict]:
    cur = conn.execute(sql, params)
    cols = [d[0] for d in cur.description or ()]
    return [dict(zip(cols, r)) for r in cur]


def run_meta(conn: sqlite3.Connection, run: str) -> dict:
    row = conn.execute("SELECT meta FROM run WHERE run = ?", (run,)).fetchone()
    return json.loads(row[0] or "{}") if row else {}


def counters(conn: sqlite3.Connection, run: str, metrics=None, sampled: bool = True) -> dict[int, dict[str, float]]:
    """{kernel_id: {ncu metric: value}} of a run (only `metrics` when given): the one
    counters reader of classify, roofline, compare and advise. With `sampled`, a launch
    without counters of its own that a sampled capture linked to its measured sibling
    (kernels.sampled_from) reads the sibling's (the same dict, never copied to the database)."""
    q, params = "SELECT kernel_id, metric, value FROM counters WHERE run = ?", [run]
    if metrics is not None:
        metrics = list(metrics)
        q += f" AND metric IN ({','.join('?' * len(metrics))})"
        params += metrics
    out: dict[int, dict[str, float]] = {}
    for kid, metric, value in conn.execute(q, params):
        got = out.get(kid)
        if got is None:
            got = out[kid] = Counters()
        dict.__setitem__(got, metric, value)  # filling: nothing looked up yet
    if sampled and out:
        add_sampled(conn, run, out)
    return out


def add_sampled(conn: sqlite3.Connection, run: str, out: dict) -> None:
    """Each launch a sampled capture linked to a measured sibling reads the sibling's counters."""
    for kid, measured in conn.execute(
        "SELECT id, sampled_from FROM launch WHERE run = ? AND sampled_from IS NOT NULL", (run,)
    ):
        if kid not in out and measured in out:
            out[kid] = out[measured]


def timeline_source(conn: sqlite3.Connection, run: str) -> str | None:
    """The tool whose launches are the run's timeline: the most preferred one it has
    (nsys over the CUPTI tracer, ...); None for a counters-only run."""
    # one seek of the (run, source) index per tool, not a walk of every launch of the run
    have = "SELECT EXISTS (SELECT 1 FROM launch_row WHERE run = ? AND source = ?)"
    return next((s for s in timeline_sources() if conn.execute(have, (run, s)).fetchone()[0]), None)


def command_of(meta: dict) -> list[str] | None:
    """The command a run's workload ran: as `profkit capture` recorded it, else the launched
    process's arguments an nsys capture recorded (PROCESS_0:COMMAND, PROCESS_0:ARGUMENT_n)."""
    cmd = meta.get("command")
    if isinstance(cmd, list):
        return [str(c) for c in cmd]
    cap = meta.get("nsys_capture")
    if isinstance(cap, dict) and "PROCESS_0:COMMAND" in cap:
        n = sum(1 for k in cap if str(k).startswith("PROCESS_0:ARGUMENT_"))
        return [str(cap["PROCESS_0:COMMAND"])] + [str(cap.get(f"PROCESS_0:ARGUMENT_{i}", "")) for i in range(n)]
    return None


def lab_op(meta: dict) -> str | None:
    """The lab workload a run was captured from (its command ran profkit.kernels.run OP)."""
    cmd = command_of(meta) or []
    if "profkit.kernels.run" in cmd:
        i = cmd.index("profkit.kernels.run") + 1
        return cmd[i] if i < len(cmd) else None
    return None
