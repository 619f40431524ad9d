"""A folder of profiles (one sub-folder per run, as `profkit capture` writes them and as
profiles/ ships them): which report files of each folder to load, and loading them.

Each folder's report files go into one run named after the folder; a file already loaded
is skipped, so running it twice changes nothing. A folder of a multi-process run holds one
report per rank (run.rank0.nsys.sqlite, run.rank1.nsys.sqlite, ...): each rank keeps its own.
"""

from __future__ import annotations

from pathlib import Path

from profkit import parsers
from profkit.core.errors import ProfkitError
from profkit.store.ingest import Loaded, _opened, capture_meta, ingest, report_files, sampled_facts, sha256_of  # noqa: F401 (read here too)
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
        parsers.prefetch([f for _, files in plan for f in files if not s.has_file(sha256_of(f))])
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
            )
            out.extend(got)
            if meta:
                with _opened(db, store) as s:
                    s.set_run_meta(folder.name, meta)
            if on_run:
                on_run(folder.name, got)
    if not out:
        raise ProfkitError(f"{root}: no report files found (expected one folder per run)")
    return out
