"""A folder of profiles (one sub-folder per run, as `profkit capture` writes them and as
profiles/ ships them): which report files of each folder to load, and loading them.

Each folder's report files go into one run named after the folder; a file already loaded
is skipped, so running it twice changes nothing. A folder of a multi-process run holds one
report per rank (run.rank0.nsys.sqlite, run.rank1.nsys.sqlite, ...): each rank keeps its own.
"""
from __future__ import annotations

import json
from pathlib import Path

from . import parsers
from .errors import BadInput, ProfkitError
from .ingest import Loaded, ingest, rank_in_name, sha256_of
from .store import Store

def report_files(folder: Path) -> list[Path]:
    """One timeline and one counter file per rank (a single-process run has one rank: None)."""
    found: dict[int | None, dict[str, Path]] = {}
    for f in sorted(p for p in folder.iterdir() if p.is_file()):
        try:
            fmt = parsers.detect(f).FORMAT
        except BadInput:
            continue  # notes, logs, metric lists
        found.setdefault(rank_in_name(f), {}).setdefault(fmt, f)
    out: list[Path] = []
    for rank in sorted(found, key=lambda r: -1 if r is None else r):
        have = found[rank]
        # one file per role is enough: the nsys export beats its .nsys-rep (no nsys needed)
        for role in parsers.ROLES:
            out += [have[f] for f in parsers.preference(role) if f in have][:1]
    return out


def capture_meta(folder: Path) -> dict | None:
    """What `profkit capture` recorded beside the reports (GPU, versions, command, the
    workload's reference checks under `correctness`); merged into the run's meta."""
    path = folder / "capture.json"
    if not path.is_file():
        return None
    try:
        meta = json.loads(path.read_text())
    except ValueError as e:
        raise BadInput(path, f"not JSON ({e})") from None
    if not isinstance(meta, dict):
        raise BadInput(path, "not a JSON object")
    return meta


def sampled_facts(files: list[Path], meta: dict | None) -> dict | None:
    """How ncu sampled a command capture (capture.json `sampling.ncu_filter`), as facts of its
    counters report: the store links the sampled launches with it."""
    spec = ((meta or {}).get("sampling") or {}).get("ncu_filter")
    if not isinstance(spec, dict):
        return None
    return {f: {"ncu_filter": spec} for f in files if parsers.detect(f).ROLE == "counters"}


def load_profiles(root: Path, db: str, on_file=None, on_progress=None, on_run=None) -> list[Loaded]:
    """Every run folder under `root` into `db`. `on_file(Loaded)` hears each file as it lands,
    `on_run(run, [Loaded])` each run once its files are in, `on_progress` the rows of a file."""
    root = Path(root)
    if not root.is_dir():
        raise ProfkitError(f"{root}: no such folder of profiles")
    out: list[Loaded] = []
    # the slow readers (ncu's) start on every file not loaded yet while the folders load in turn
    plan = [(folder, report_files(folder)) for folder in sorted(p for p in root.iterdir() if p.is_dir())]
    with Store(db) as s:
        parsers.prefetch([f for _, files in plan for f in files if not s.has_file(sha256_of(f))])
    for folder, files in plan:
        if files:
            meta = capture_meta(folder)  # read first: a bad capture.json loads nothing
            got = ingest(db, files, run=folder.name, on_file=on_file, facts=sampled_facts(files, meta),
                         on_progress=on_progress)
            out.extend(got)
            if meta:
                with Store(db) as s:
                    s.set_run_meta(folder.name, meta)
            if on_run:
                on_run(folder.name, got)
    if not out:
        raise ProfkitError(f"{root}: no report files found (expected one folder per run)")
    return out
