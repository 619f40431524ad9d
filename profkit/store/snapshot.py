"""Answers kept in memory for callers that read the same thing again and again (the main job
reads every run's kernels and counters from classify, advise, claims and rooflines).

A Cache belongs to one Store: snapshot() answers each read once while no one writes;
keep_counters() keeps each run's counters until this Store adds to the run or another
connection commits.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

from profkit.core.errors import ProfkitError
from profkit.core.metrics import Counters
from profkit.store import read


class Cache:
    def __init__(self) -> None:
        self.memo: dict | None = None  # snapshot(): key -> answer
        self.kept: dict | None = None  # keep_counters(): run -> its counters
        self.kept_version: int | None = None

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        self.memo = {}
        try:
            yield
        finally:
            self.memo = None

    @contextmanager
    def keep_counters(self) -> Iterator[None]:
        self.kept, self.kept_version = {}, None
        try:
            yield
        finally:
            self.kept = None

    def writing(self, run: str | None = None) -> None:
        """Before a write (to `run`, if it is one run's): refused inside snapshot() (its answers
        would go stale); the run's kept counters forgotten."""
        if self.memo is not None:
            raise ProfkitError("internal: a write inside Store.snapshot()")
        if run is not None and self.kept is not None:
            self.kept.pop(run, None)

    def remember(self, key: tuple, compute):
        if self.memo is None:
            return compute()
        key = ("remember",) + key
        if key not in self.memo:
            self.memo[key] = compute()
        return self.memo[key]

    def query(self, conn: sqlite3.Connection, sql: str, params=()) -> list[dict]:
        if self.memo is None:
            return read.query(conn, sql, params)
        key = ("query", sql, tuple(params))
        if key not in self.memo:
            self.memo[key] = read.query(conn, sql, params)
        return list(self.memo[key])

    def counters(
        self, conn: sqlite3.Connection, run: str, metrics=None, sampled: bool = True
    ) -> dict[int, dict[str, float]]:
        if self.kept is not None:
            return self._kept_counters(self.kept, conn, run, metrics, sampled)
        if self.memo is None:
            return read.counters(conn, run, metrics, sampled)
        key = ("counters", run, None if metrics is None else tuple(metrics), sampled)
        if key not in self.memo:
            self.memo[key] = read.counters(conn, run, metrics, sampled)
        return dict(self.memo[key])

    def _kept_counters(
        self, kept: dict, conn: sqlite3.Connection, run: str, metrics, sampled: bool
    ) -> dict[int, dict[str, float]]:
        version = conn.execute("PRAGMA data_version").fetchone()[0]
        if version != self.kept_version:
            kept.clear()
            self.kept_version = version
        base = kept.get(run)
        if base is None:
            base = kept[run] = read.counters(conn, run, None, sampled=False)
        if metrics is None:
            out = dict(base)
        else:  # as read.counters reads them: the launches in the same order, each one's metrics in its order
            wanted = set(metrics)
            out = {}
            for kid, c in base.items():
                if not wanted.isdisjoint(c):
                    sub = Counters()
                    for m, v in c.items():
                        if m in wanted:
                            dict.__setitem__(sub, m, v)
                    out[kid] = sub
        if sampled and out:
            read.add_sampled(conn, run, out)
        return out
