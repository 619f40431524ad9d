"""Writing the store: a parsed report, labels, advice, tuning trials, bench rows, run meta.

The store is the only writer of the database, and each write is one transaction
(profkit.store.transaction): a failed or killed load leaves no trace, because nothing is
visible until COMMIT. Plain functions of the writer's connection; Store calls them.
"""

from __future__ import annotations

import dataclasses
import json
import operator
import os
import re
import sqlite3
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from profkit.core import environment
from profkit.core.nvtx import names_of
from profkit.core.rows import GPU_COPY_FIELDS, HOST_CALL_FIELDS, KERNEL_FIELDS, Parsed, bounded_meta
from profkit.store import bulk as _bulk
from profkit.store import inherit, ops_table, source_rows
from profkit.store.connection import switch_journal
from profkit.store.ids import name_ids, path_ids
from profkit.store.link import link
from profkit.store.schema import DEFERRABLE_INDEXES, now, restore_indexes
from profkit.store.transaction import transaction


def add_report(
    conn: sqlite3.Connection,
    run: str,
    report: Parsed,
    sha256,
    rank: int | None = None,
    progress=None,
    guard=None,
    before_commit=None,
) -> dict:
    """Load one parsed report into `run` in a single transaction (Store.add_report says how)."""
    c = conn
    bulk = report.bulk
    journal = None
    if bulk is not None:  # ATTACH, foreign_keys and journal_mode cannot change inside a transaction
        journal = switch_journal(c, "DELETE")
        c.execute("ATTACH ? AS src", (f"{Path(bulk.source).resolve().as_uri()}?mode=ro",))
        # a bulk copy writes ids it just made (run, file, paths): checking each of millions
        # of rows against them costs three index searches a row
        c.execute("PRAGMA foreign_keys = OFF")
    try:
        with transaction(c) as t:
            late = not isinstance(sha256, str)
            if not late and c.execute("SELECT 1 FROM report_file WHERE sha256 = ?", (sha256,)).fetchone():
                t.rollback()
                return {"skipped": True}
            if guard is not None:
                guard(c)
            # (a late hash: a placeholder no file has, replaced before COMMIT)
            file_id = _add_file(c, run, report, f"pending:{os.getpid()}:{id(sha256)}" if late else sha256, rank)
            if bulk is not None:
                _bulk.add_bulk(c, run, file_id, rank, report, progress)
                if report.extra_kernels:
                    _add_rows(
                        c,
                        run,
                        file_id,
                        rank,
                        dataclasses.replace(
                            report, kernels=report.extra_kernels, ranges=[], counters=[], rules=[], bulk=None
                        ),
                    )
            else:
                _add_rows(c, run, file_id, rank, report)
            _add_host(c, run, file_id, rank, report)
            inherit.add(c, file_id)
            link(c, run)
            if late:
                digest = sha256.result()
                if c.execute("SELECT 1 FROM report_file WHERE sha256 = ?", (digest,)).fetchone():
                    t.rollback()
                    return {"skipped": True}
                c.execute("UPDATE report_file SET sha256 = ? WHERE id = ?", (digest, file_id))
            if before_commit is not None:
                before_commit()
    finally:
        if bulk is not None:
            _bulk.drop_staging(c)
            if any(r[1] == "side" for r in c.execute("PRAGMA database_list")):
                c.execute("DETACH side")  # (a side writer's rows: the database goes with it)
            c.execute("DETACH src")
            c.execute("PRAGMA foreign_keys = ON")
            if journal:
                switch_journal(c, "WAL")
    return {"skipped": False, "file_id": file_id, **report.summary()}


@contextmanager
def indexes_after(conn: sqlite3.Connection) -> Iterator[None]:
    """Within it, loads into a database without counters write them without the deferrable
    indexes (schema.DEFERRABLE_INDEXES), built once at the end; a database with counters keeps
    its indexes (a build would sort every row it holds)."""
    if conn.execute("SELECT 1 FROM counter LIMIT 1").fetchone():
        yield
        return
    with transaction(conn):
        for name in DEFERRABLE_INDEXES:
            conn.execute(f"DROP INDEX IF EXISTS {name}")
    try:
        yield
    finally:
        try:
            restore_indexes(conn)
        except sqlite3.Error:  # (busy or interrupted: the next writer to open the database builds them)
            pass


def _add_file(c: sqlite3.Connection, run: str, report: Parsed, sha256: str, rank: int | None) -> int:
    # every way a command or environment enters; bounded again (a Parsed's facts may be added to)
    facts = environment.scrub_meta(bounded_meta(report.facts or {}))
    if not c.execute("SELECT 1 FROM run WHERE run = ?", (run,)).fetchone():
        c.execute(
            "INSERT INTO run (run, created_at, gpu_name, meta) VALUES (?, ?, ?, ?)",
            (run, now(), facts.get("gpu_name"), json.dumps(facts, sort_keys=True, default=str)),
        )
    else:
        merge_meta(c, run, facts)
    cur = c.execute(
        "INSERT INTO report_file (run, path, sha256, format, loaded_at, kernels, ranges, counters, facts, rank)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            run,
            report.path,
            sha256,
            report.format,
            now(),
            report.summary()["kernels"],
            len(report.ranges),
            len(report.counters),
            json.dumps(facts, sort_keys=True, default=str),
            rank,
        ),
    )
    assert cur.lastrowid is not None  # (an INSERT that succeeded)
    return cur.lastrowid


def _add_rows(c: sqlite3.Connection, run: str, file_id: int, rank: int | None, report: Parsed) -> None:
    """A report of tuples (every parser but the bulk one)."""
    at = KERNEL_FIELDS.index("nvtx_path")
    kernel_names = [names_of(k[at]) for k in report.kernels]
    range_names = [names_of(r[8]) or (r[1],) for r in report.ranges]
    distinct = list(dict.fromkeys(n for n in kernel_names + range_names if n))
    ids = dict(zip(distinct, path_ids(c, distinct)))
    base = (c.execute("SELECT coalesce(max(id), 0) FROM launch_row").fetchone()[0]) + 1
    kn, ks, kr, ka = (KERNEL_FIELDS.index(f) for f in ("kernel_name", "short_name", "nvtx_range", "api_name"))
    names = name_ids(c, (n for k in report.kernels for n in (k[kn], k[ks], k[ka]) if n is not None))
    names[None] = None
    plain = [
        i
        for i, f in enumerate(KERNEL_FIELDS)
        if f not in ("kernel_name", "short_name", "nvtx_range", "nvtx_path", "api_name")
    ]
    cols = (
        ("id", "run", "file_id", "rank", "source")
        + tuple(KERNEL_FIELDS[i] for i in plain)
        + ("name_id", "short_id", "api_id", "path_id")
    )
    sql = f"INSERT INTO launch_row ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})"
    fields = operator.itemgetter(*plain)  # (a tuple: plain has more than one field)
    c.executemany(
        sql,
        (
            (base + i, run, file_id, rank, report.source)
            + fields(k)
            + (names[k[kn]], names[k[ks]], names[k[ka]], ids.get(n) if n else None)
            for i, (k, n) in enumerate(zip(report.kernels, kernel_names))
        ),
    )
    # a launch whose innermost range or path text is not its path's text and path (the view
    # shows these instead)
    shown = {n: (n[-1], "/".join("" if x is None else x for x in n)) for n in distinct}  # (a path's, once)
    own = [
        (base + i, k[kr], str(k[at]) if k[at] is not None else None)
        for i, (k, n) in enumerate(zip(report.kernels, kernel_names))
        if (k[kr], str(k[at]) if k[at] is not None else None) != (shown[n] if n else (None, None))
    ]
    c.executemany("INSERT INTO launch_nvtx (launch_id, nvtx_range, nvtx_path) VALUES (?, ?, ?)", own)
    seq_to_id = {k[0]: base + i for i, k in enumerate(report.kernels)}
    c.executemany(
        "INSERT INTO nvtx_event (run, file_id, rank, domain, kind, start_ns, end_ns, pid, tid, path_id)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        ((run, file_id, rank, r[0], r[2], r[3], r[4], r[5], r[6], ids[n]) for r, n in zip(report.ranges, range_names)),
    )
    c.executemany(
        "INSERT INTO counter (launch_id, metric, unit, value) VALUES (?, ?, ?, ?)",
        ((seq_to_id[s], m, u, v) for s, m, u, v in report.counters),
    )
    c.executemany(
        "INSERT INTO rule_result (launch_id, section, rule, severity, message, speedup_type,"
        " estimated_speedup_pct) VALUES (?, ?, ?, ?, ?, ?, ?)",
        ((seq_to_id[r[0]],) + tuple(r[1:]) for r in report.rules),
    )
    source_rows.add(c, file_id, seq_to_id, report)
    ops_table.write(c, run, file_id, rank, report.ops, seq_to_id)


def _add_host(c: sqlite3.Connection, run: str, file_id: int, rank: int | None, report: Parsed) -> None:
    """The report's host calls and GPU memory operations (the idle causes' sources)."""
    c.executemany(
        f"INSERT INTO host_call (run, file_id, rank, {', '.join(HOST_CALL_FIELDS)})"
        f" VALUES (?, ?, ?{', ?' * len(HOST_CALL_FIELDS)})",
        ((run, file_id, rank) + tuple(h) for h in report.host_calls),
    )
    c.executemany(
        f"INSERT INTO gpu_copy (run, file_id, rank, {', '.join(GPU_COPY_FIELDS)})"
        f" VALUES (?, ?, ?{', ?' * len(GPU_COPY_FIELDS)})",
        ((run, file_id, rank) + tuple(g) for g in report.gpu_copies),
    )


# the timeline facts in a label's evidence JSON, as classify writes them (sorted keys, integers)
_TIMELINE = re.compile(r'\{"api_ns": (-?\d+|null), "duration_ns": (-?\d+|null), "gap_ns": (-?\d+|null)\}')
_PACK_BITS = 62  # of a JSON integer SQLite reads as int64: a launch id's offset and its label's kind
_LABEL = "INSERT INTO label (kernel_id, run, label, reason, evidence_id, api_ns, duration_ns, gap_ns) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"


class Labels:
    """A run's labels, written in the writer's transaction: each distinct evidence JSON once
    (label_evidence: the JSON around the timeline, the rule and a reason), each launch's label,
    its own reason where it differs from its evidence row's, and its timeline facts (schema 21)."""

    def __init__(self, conn: sqlite3.Connection, run: str) -> None:
        conn.execute("DELETE FROM label WHERE run = ?", (run,))
        conn.execute("DELETE FROM label_evidence WHERE run = ?", (run,))
        self.conn, self.run = conn, run
        self._ids: dict[tuple[str, str | None], tuple[int, str]] = {}
        self._next = conn.execute("SELECT coalesce(max(id), 0) + 1 FROM label_evidence").fetchone()[0]

    def evidence(self, head: str, tail: str | None, reason: str, rule: str | None = None) -> tuple[int, str]:
        """(id, reason) of the evidence row of this JSON (head, or head + timeline + tail), made
        with `reason` where it is new."""
        got = self._ids.get((head, tail))
        if got is None:
            if rule is None:
                rule = json.loads(head if tail is None else f"{head}null{tail}").get("rule")
            got = self._ids[head, tail] = (self._next, reason)
            self.conn.execute(
                "INSERT INTO label_evidence (id, run, rule, reason, head, tail) VALUES (?, ?, ?, ?, ?, ?)",
                (self._next, self.run, rule, reason, head, tail),
            )
            self._next += 1
        return got

    def row(self, r: dict) -> tuple:
        """The label row of one of classify's rows (its evidence JSON split at its timeline)."""
        text, reason = r["evidence"], r["reason"]
        at = text.rfind(', "timeline": {')
        m = _TIMELINE.match(text, at + 14) if at >= 0 else None
        if m is None:
            eid, shared = self.evidence(text, None, reason)
            t: tuple = (None, None, None)
        else:
            eid, shared = self.evidence(text[: at + 14], text[m.end() :], reason)
            t = tuple(None if x == "null" else int(x) for x in m.groups())
        return (r["kernel_id"], self.run, r["label"], None if reason == shared else reason, eid, *t)

    def add(self, rows: Iterable[tuple]) -> None:
        """Label rows: (kernel id, run, label, own reason or None, evidence id, api_ns, duration_ns, gap_ns)."""
        self.conn.executemany(_LABEL, rows)

    def add_columns(self, kid, kinds: list[tuple], code, gap, null: int, chunk: int = 1 << 18, tick=None) -> None:
        """Label rows as columns: launch ids `kid` (ascending), each of kind `kinds[code]`
        ((label, own reason or None, evidence id, timed)), `gap` its idle gap (`null`: none).
        A timed kind's api_ns and duration_ns are its launch's own (launch_row's call length
        and duration). Each chunk goes to SQLite as one JSON array of integers, a launch's id
        offset, gap and kind packed in each: SQLite unpacks them in C (a bound tuple a row
        costs ~3 us, a second array joined by position a temporary table). A gap outside the
        32 bits above the run's least (from -2 s) is set after, by its launch's id.
        `tick(n)`: n more rows written."""
        import numpy as np

        c = self.conn
        kid, code, gap = (np.asarray(x, dtype=np.int64) for x in (kid, code, gap))
        c.execute("DROP TABLE IF EXISTS temp.label_kind")
        c.execute("CREATE TEMP TABLE label_kind (code INTEGER PRIMARY KEY, label, reason, evidence_id, timed)")
        c.executemany(
            "INSERT INTO temp.label_kind VALUES (?, ?, ?, ?, ?)",
            ((i, lab, why, eid, int(timed)) for i, (lab, why, eid, timed) in enumerate(kinds)),
        )
        kbits = max(len(kinds) - 1, 1).bit_length()
        has = gap != null
        low = gap[has & (gap >= -(1 << 31))]
        least = int(low.min()) if len(low) else 0
        room = max(_PACK_BITS - kbits - 1, 0)  # (an id offset keeps a bit at least)
        gbits = min((int(gap[has].max()) - least + 1).bit_length(), 32, room) if len(low) else 0
        fits = has & (gap >= least) & (gap < least + (1 << gbits) - 1)
        slot = np.where(fits, gap - least + 1, 0)  # 0: none (or set after)
        span = 1 << (_PACK_BITS - kbits - gbits)  # ids past a chunk's first within this fit beside the rest
        at = 0
        while at < len(kid):
            hi = min(at + chunk, int(np.searchsorted(kid, kid[at] + span)))
            base = int(kid[at])
            packed = ((((kid[at:hi] - base) << gbits) | slot[at:hi]) << kbits) | code[at:hi]
            c.execute(
                "INSERT INTO label (kernel_id, run, label, reason, evidence_id, api_ns, duration_ns, gap_ns)"
                " SELECT l.id, ?, k.label, k.reason, k.evidence_id, CASE WHEN k.timed THEN l.api_end_ns - l.api_start_ns END,"
                " CASE WHEN k.timed THEN l.duration_ns END,"
                f" CASE WHEN k.timed THEN nullif((j.value >> {kbits}) & {(1 << gbits) - 1}, 0) + {least - 1} END"
                f" FROM json_each(?) j JOIN temp.label_kind k ON k.code = j.value & {(1 << kbits) - 1}"
                f" JOIN launch_row l ON l.id = (j.value >> {kbits + gbits}) + ?",
                (self.run, json.dumps(packed.tolist()), base),
            )
            if tick:
                tick(hi - at)
            at = hi
        far = np.flatnonzero(has & ~fits)
        c.executemany(
            "UPDATE label SET gap_ns = ? WHERE kernel_id = ? AND (SELECT timed FROM temp.label_kind WHERE code = ?)",
            zip(gap[far].tolist(), kid[far].tolist(), code[far].tolist()),
        )
        c.execute("DROP TABLE temp.label_kind")


def replace_labels(conn: sqlite3.Connection, run: str, rows: list[dict]) -> None:
    with transaction(conn):
        w = Labels(conn, run)
        w.add([w.row(r) for r in rows])


def replace_labels_iter(conn: sqlite3.Connection, run: str, rows, tick=None, chunk: int = 50_000):
    """replace_labels for rows that come one at a time: a chunk held at most."""
    with transaction(conn):
        w = Labels(conn, run)
        batch = []
        for r in rows:
            batch.append(w.row(r))
            yield r
            if len(batch) >= chunk:
                w.add(batch)
                if tick:
                    tick(len(batch))
                batch = []
        w.add(batch)
        if tick:
            tick(len(batch))


def write_labels(conn: sqlite3.Connection, run: str, fill) -> None:
    """A run's labels in one transaction: fill(Labels) writes them. Foreign keys unchecked
    (fill's labels are of the run's launches, their evidence rows made in this transaction:
    checking each of a million rows against both cost a third of the insert)."""
    fk = conn.execute("PRAGMA foreign_keys").fetchone()[0]
    conn.execute("PRAGMA foreign_keys = OFF")  # (it cannot change inside a transaction)
    try:
        with transaction(conn):
            fill(Labels(conn, run))
    finally:
        conn.execute(f"PRAGMA foreign_keys = {'ON' if fk else 'OFF'}")


_ADVICE = (
    "run",
    "scope",
    "rank",
    "kind",
    "nvtx_path",
    "kernel_name",
    "label",
    "share",
    "share_wall",
    "recoverable_ns",
    "action",
    "how",
    "evidence",
)


def replace_advice(conn: sqlite3.Connection, run: str, scope: str | None, rows: list[dict]) -> None:
    with transaction(conn):
        conn.execute("DELETE FROM advice_item WHERE run = ? AND scope = ?", (run, scope or ""))
        conn.executemany(
            f"INSERT INTO advice_item ({', '.join(_ADVICE)}) VALUES ({', '.join('?' * len(_ADVICE))})",
            [tuple(r[k] for k in _ADVICE) for r in rows],
        )


_PHASE = (
    "run",
    "seq",
    "name",
    "kind",
    "start_ns",
    "end_ns",
    "launches",
    "gpu_ns",
    "steps",
    "step_ns",
    "step_spread_ns",
    "steady",
    "how",
)


def set_op_model(conn: sqlite3.Connection, rows: list[tuple]) -> None:
    with transaction(conn):
        ops_table.set_model(conn, rows)


def replace_phases(conn: sqlite3.Connection, run: str, rows: list[dict]) -> None:
    with transaction(conn):
        conn.execute("DELETE FROM phase WHERE run = ?", (run,))
        conn.executemany(
            f"INSERT INTO phase ({', '.join(_PHASE)}) VALUES ({', '.join('?' * len(_PHASE))})",
            [tuple(r[k] for k in _PHASE) for r in rows],
        )


def add_trial(
    conn: sqlite3.Connection, kernel: str, source_hash: str, shape: str, gpu: str, config: str, ok, ms, rel_err, error
) -> None:
    """One statement outside any transaction: committed at once (a killed tune keeps what it did)."""
    conn.execute(
        "INSERT OR REPLACE INTO tune_trial (kernel, source_hash, shape, gpu, config, ok, ms, rel_err, error,"
        " created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (kernel, source_hash, shape, gpu, config, None if ok is None else int(ok), ms, rel_err, error, now()),
    )


_BENCH = (
    "op",
    "variant",
    "shape",
    "dtype",
    "gpu",
    "driver",
    "torch",
    "triton",
    "date",
    "ok",
    "rel_err",
    "ms",
    "gbps",
    "tflops",
    "pct_of_copy",
    "speedups",
    "note",
)


def add_bench_rows(conn: sqlite3.Connection, rows: list[dict]) -> None:
    with transaction(conn):
        conn.executemany(
            f"INSERT INTO bench_result ({', '.join(_BENCH)}) VALUES ({', '.join('?' * len(_BENCH))})",
            [tuple(r.get(k) for k in _BENCH) for r in rows],
        )


def merge_meta(conn: sqlite3.Connection, run: str, facts: dict) -> None:
    """Facts the run's meta lacks added to it (those it has are kept); its GPU name set if unset."""
    row = conn.execute("SELECT meta, gpu_name FROM run WHERE run = ?", (run,)).fetchone()
    meta = json.loads(row[0] or "{}")
    facts = environment.scrub_meta(bounded_meta(facts))  # capture.json, hand-written or older, as any report's facts
    for k, v in facts.items():
        meta.setdefault(k, v)
    meta = bounded_meta(meta)  # a run of many reports: the facts of each added
    conn.execute(
        "UPDATE run SET meta = ?, gpu_name = coalesce(gpu_name, ?) WHERE run = ?",
        (json.dumps(meta, sort_keys=True, default=str), facts.get("gpu_name"), run),
    )


def set_run_meta(conn: sqlite3.Connection, run: str, facts: dict) -> None:
    with transaction(conn):
        merge_meta(conn, run, facts)


def set_gpu(conn: sqlite3.Connection, run: str, gpu: str) -> bool:
    """The run's GPU set to `gpu` (ingest --gpu) unless one of its reports names a GPU: a name
    given by hand may be corrected by hand, a measured one is kept. True: set."""
    with transaction(conn):
        named = conn.execute(
            "SELECT 1 FROM report_file WHERE run = ? AND json_extract(facts, '$.gpu_name') IS NOT NULL LIMIT 1", (run,)
        ).fetchone()
        if named:
            return False
        conn.execute(
            "UPDATE run SET gpu_name = ?, meta = json_set(coalesce(meta, '{}'), '$.gpu_name', ?) WHERE run = ?",
            (gpu, gpu, run),
        )
        return True
