"""Load report files into the store: detect the format, skip what is already loaded
(content hash), parse, and write each file in one transaction."""
from __future__ import annotations

import hashlib
import inspect
import re
from dataclasses import dataclass
from pathlib import Path

from profkit import parsers

from .store import Store

# a rank in a file name: run.rank1.nsys.sqlite, rank0.ncu-rep, trace_rank_3.sqlite (the last one counts)
_RANK = re.compile(r"(?:^|[._-])rank[_-]?(\d+)(?=[._-]|$)", re.I)


@dataclass
class Loaded:
    path: str
    run: str
    format: str
    skipped: bool
    kernels: int = 0
    ranges: int = 0
    counters: int = 0
    loaded_as: str | None = None  # the file that already holds these bytes
    rank: int | None = None
    rules: int = 0  # ncu guided-analysis results loaded (the rules view)


def sha256_of(path: Path, progress=None) -> str:
    """progress(done, total): bytes hashed so far."""
    h = hashlib.sha256()
    total, done = Path(path).stat().st_size, 0
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            h.update(chunk)
            done += len(chunk)
            if progress:
                progress(done, total)
    return h.hexdigest()


def _parse(parser, path: Path, on_progress=None):
    """parser.parse, telling on_progress(file, phase, done, total) where the parser can."""
    if on_progress and "progress" in inspect.signature(parser.parse).parameters:
        return parser.parse(path, progress=lambda phase, done, total: on_progress(path, phase, done, total))
    if on_progress:
        on_progress(path, "parsing", 0, None)
    return parser.parse(path)


def rank_in_name(path: Path) -> int | None:
    found = _RANK.findall(parsers.suffix_pattern().sub("", Path(path).name))
    return int(found[-1]) if found else None


def run_name_for(path: Path) -> str:
    """The run a file loads into by default: its name without report suffixes and rank
    (run.rank0.nsys.sqlite and run.rank1.nsys.sqlite both load into `run`)."""
    base = parsers.suffix_pattern().sub("", Path(path).name)
    m = list(_RANK.finditer(base))
    if m:
        base = (base[:m[-1].start()] + base[m[-1].end():]).strip("._-")
    return base or Path(path).resolve().parent.name or Path(path).stem


def rank_of(path: Path, report, explicit: int | None = None) -> int | None:
    """explicit (--rank) > the rank the report recorded (RANK in an nsys capture's
    environment) > a rank in the file name > None (a single-process run)."""
    if explicit is not None:
        return explicit
    recorded = (report.facts or {}).get("rank")
    if recorded is not None:
        return int(recorded)
    return rank_in_name(path)


def _load(store: Store, path: Path, report, digest: str, run: str, rank: int | None, on_progress=None) -> Loaded:
    tell = (lambda phase, done, total: on_progress(path, phase, done, total)) if on_progress else None
    out = store.add_report(run, report, digest, rank, progress=tell)
    if out.get("skipped"):  # another process loaded the same bytes meanwhile
        return Loaded(str(path), run, report.format, True, rank=rank)
    return Loaded(str(path), run, report.format, False, out["kernels"], out["ranges"], out["counters"], rank=rank,
                  rules=out.get("rules", 0))


def ingest(db: str, paths: list[Path], run: str | None = None, on_file=None, rank: int | None = None,
           parsed_reports: dict | None = None, facts: dict | None = None, on_progress=None) -> list[Loaded]:
    """Ingest files in order. Every file is detected and parsed before any is written, so a
    bad file raises and leaves the database as it was; each file then loads in its own
    transaction.

    All files of one call go to one run: `run`, or the name of the first file. Each file's
    rank is `rank` if given, else found by rank_of (None for single-process runs).
    `parsed_reports` ({path: Parsed}) holds files a caller already parsed (capture does);
    `facts` ({path: dict}) adds what the caller knows of a file to its facts (capture: how ncu
    sampled, which the store needs to link its launches). on_file(Loaded) hears of each file
    as it lands; on_progress(file, phase, done, total) of the work on each (phases: hashing,
    the parser's, writing; total None: unknown).
    """
    paths = [Path(p) for p in paths]
    run = run or (run_name_for(paths[0]) if paths else None)
    # parse everything before writing anything: one bad file leaves the database untouched
    parsed = []
    for p in paths:
        parser = parsers.detect(p)
        hashed = (lambda done, total, p=p: on_progress(p, "hashing", done, total)) if on_progress else None
        parsed.append((p, parser, sha256_of(p, hashed)))
    with Store(db) as store:
        out, todo = [], []
        for p, parser, digest in parsed:
            seen = store.has_file(digest)
            if seen:
                out.append(Loaded(str(p), seen[0], parser.FORMAT, True, loaded_as=seen[1]))
                if on_file:
                    on_file(out[-1])
            else:
                known = (parsed_reports or {}).get(p)
                todo.append((p, known if known is not None else _parse(parser, p, on_progress), digest))
        for p, report, digest in todo:
            if facts and facts.get(p):
                report.facts = {**(report.facts or {}), **facts[p]}
            loaded = _load(store, p, report, digest, run, rank_of(p, report, rank), on_progress)
            out.append(loaded)
            if on_file:
                on_file(loaded)
        return out
