"""A folder of profiles (one sub-folder per run, as `profkit capture` writes them and as
profiles/ ships them): which report files of each folder to load, and loading them.

Each folder's report files go into one run named after the folder; a file already loaded
is skipped, so running it twice changes nothing. A folder of a multi-process run holds one
report per rank (run.rank0.nsys.sqlite, run.rank1.nsys.sqlite, ...): each rank keeps its own.
"""

from __future__ import annotations

import os
from concurrent.futures import Future
from pathlib import Path

from profkit import parsers
from profkit.core.errors import ProfkitError
from profkit.store.ingest import (  # noqa: F401 (read here too)
    POOL_MAX_BYTES,
    Loaded,
    _opened,
    _parse_one,
    _size,
    capture_meta,
    ingest,
    report_files,
    sampled_facts,
    sha256_of,
)
from profkit.store.store import Store


def load_profiles(
    root: Path, db: str, on_file=None, on_progress=None, on_run=None, store: Store | None = None, on_start=None
) -> list[Loaded]:
    """Every run folder under `root` into `db`. `on_file(Loaded)` hears each file as it lands,
    `on_run(run, [Loaded])` each run once its files are in, `on_progress` the rows of a file;
    `store`: the caller's open Store of `db`, used and left open; `on_start([folder])` runs once
    the slow readers have started, before the first folder loads (work of the caller's that
    can overlap them)."""
    root = Path(root)
    if not root.is_dir():
        raise ProfkitError(f"{root}: no such folder of profiles")
    out: list[Loaded] = []
    # the slow readers (ncu's) start on every file not loaded yet while the folders load in turn
    plan = [(folder, report_files(folder)) for folder in sorted(p for p in root.iterdir() if p.is_dir())]
    with _opened(db, store) as s:
        new = [f for _, files in plan for f in files if not s.has_file(sha256_of(f))]
    parsers.prefetch(new)
    pool, ahead = _parse_ahead(new)
    try:
        if on_start:
            on_start([folder for folder, files in plan if files])
        for folder, files in plan:
            if files:
                meta = capture_meta(folder)  # read first: a bad capture.json loads nothing
                got = ingest(
                    db,
                    files,
                    run=folder.name,
                    on_file=on_file,
                    facts=sampled_facts(files, meta),
                    on_progress=on_progress,
                    store=store,
                    parsed_reports=_taken(ahead, files),
                )
                out.extend(got)
                if meta:
                    with _opened(db, store) as s:
                        s.set_run_meta(folder.name, meta)
                if on_run:
                    on_run(folder.name, got)
    finally:
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
    if not out:
        raise ProfkitError(f"{root}: no report files found (expected one folder per run)")
    return out


def _parse_ahead(files: list[Path]):
    """(pool, {file: Future of ingest._parse_one}): the files no parser reads ahead of its own
    (nsys exports; ncu's reader has prefetch) parsed in one process of their own, in folder
    order, while this one writes and analyses the folders before them: the second core's work
    on a 2-core machine. (None, {}) on one core or with nothing to parse."""
    todo = []
    for f in files:
        try:
            mod = parsers.detect(f)
        except Exception:  # noqa: BLE001 - refused by ingest, with its reason
            continue
        if not hasattr(mod, "prefetch") and _size(f) <= POOL_MAX_BYTES:
            todo.append(f)
    if not todo or (os.cpu_count() or 1) < 2:
        return None, {}
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    # spawn, not fork: the writer's connection and threads are not copied half-way
    pool = None
    try:
        pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"))
        return pool, {f: pool.submit(_parse_one, Path(f)) for f in todo}
    except Exception:  # noqa: BLE001 - no process to be had: ingest parses them all here
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
        return None, {}


def _taken(ahead: dict[Path, Future], files: list[Path]) -> dict:
    """{file: Parsed} of these files that the process ahead parsed. One it has not started is
    parsed here instead (the process is behind: waiting would idle this one); one it refused or
    left (a report read as columns) too, by ingest, which says why in its own words."""
    out = {}
    for f in files:
        fut = ahead.pop(f, None)
        if fut is None or fut.cancel():
            continue
        try:
            report, _refused = fut.result()
        except Exception:  # noqa: BLE001 - a dead worker: ingest parses it here
            continue
        if report is not None:
            out[f] = report
    return out
