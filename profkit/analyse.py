"""The main job: load every run shipped under profiles/ (one folder per run) and report.

Each folder's report files go into one run named after the folder; a file already loaded
is skipped, so running it twice changes nothing. A folder of a multi-process run holds one
report per rank (run.rank0.nsys.sqlite, run.rank1.nsys.sqlite, ...): each rank keeps its own.
"""
from __future__ import annotations

import json
from pathlib import Path

from . import parsers
from .errors import BadInput, ProfkitError
from .ingest import Loaded, ingest, rank_in_name
from .store import Store

# one file per format per run is enough: the nsys export beats its .nsys-rep (no nsys needed)
_PREFERENCE = ("nsys-sqlite", "nsys-rep", "cupti-trace", "ncu-rep", "ncu-csv")


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
        timeline = next((have[f] for f in _PREFERENCE[:3] if f in have), None)
        counters = next((have[f] for f in _PREFERENCE[3:] if f in have), None)
        out += [f for f in (timeline, counters) if f]
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


def load_profiles(root: Path, db: str, on_file=None) -> list[Loaded]:
    root = Path(root)
    if not root.is_dir():
        raise ProfkitError(f"{root}: no such folder of profiles")
    out: list[Loaded] = []
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        files = report_files(folder)
        if files:
            meta = capture_meta(folder)  # read first: a bad capture.json loads nothing
            out.extend(ingest(db, files, run=folder.name, on_file=on_file))
            if meta:
                s = Store(db)
                try:
                    s.set_run_meta(folder.name, meta)
                finally:
                    s.close()
    if not out:
        raise ProfkitError(f"{root}: no report files found (expected one folder per run)")
    return out
