"""Load report files into the store: detect the format, skip what is already loaded
(content hash), parse, and write each file in one transaction."""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from profkit import parsers

from .store import Store

_SUFFIXES = re.compile(r"(\.(nsys|ncu|cupti|raw|lean|roofline|full))*\.(sqlite|nsys-rep|ncu-rep|csv|jsonl)(\.xz)?$", re.I)


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


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def run_name_for(path: Path) -> str:
    return _SUFFIXES.sub("", Path(path).name) or Path(path).stem


def _load(store: Store, path: Path, report, digest: str, run: str) -> Loaded:
    out = store.add_report(run, report, digest)
    if out.get("skipped"):  # another process loaded the same bytes meanwhile
        return Loaded(str(path), run, report.format, True)
    return Loaded(str(path), run, report.format, False, out["kernels"], out["ranges"], out["counters"])


def ingest(db: str, paths: list[Path], run: str | None = None, on_file=None) -> list[Loaded]:
    """Ingest files in order. Every file is detected and parsed before any is written, so a
    bad file raises and leaves the database as it was; each file then loads in its own
    transaction.

    All files of one call go to one run: `run`, or the name of the first file.
    """
    paths = [Path(p) for p in paths]
    run = run or (run_name_for(paths[0]) if paths else None)
    # parse everything before writing anything: one bad file leaves the database untouched
    parsed = []
    for p in paths:
        parser = parsers.detect(p)
        parsed.append((p, parser, sha256_of(p)))
    store = Store(db)
    try:
        out, todo = [], []
        for p, parser, digest in parsed:
            seen = store.has_file(digest)
            if seen:
                out.append(Loaded(str(p), seen[0], parser.FORMAT, True, loaded_as=seen[1]))
            else:
                todo.append((p, parser.parse(p), digest))
        for p, report, digest in todo:
            loaded = _load(store, p, report, digest, run)
            out.append(loaded)
            if on_file:
                on_file(loaded)
        return out
    finally:
        store.close()
