"""Report parsers: one module per format, found by this registry (no hand-kept list).

A parser module declares what it reads and yields, and the rest of profkit derives from that:

    FORMAT       "nsys-sqlite"            the format name stored with each loaded file
    SUFFIXES     (".sqlite",)             file name endings it reads (lower case)
    ROLE         "timeline" | "counters"  what its launches are: a timeline, or profiled counters
    SOURCE       "nsys"                   the tool whose launches it yields (launch.source)
    PREFERENCE   10                       among parsers of one role, lower is taken first
    SNIFF_ORDER  50                       lower is asked first (most specific recognisers first)
    DESCRIPTION  "..."                    one line, for messages
    sniff(path, head) -> bool             recognise a file from its name and first 4 KB
    parse(path) -> profkit.core.rows.Parsed    plain rows in normalised units; never writes SQL

Built-in parsers are the modules of this package; other packages add theirs through the
entry point group ``profkit.parsers`` (``name = "package.module"``). Detection, ingest's run
names, the main job's choice of files, the store's and timeline's source lists and the
fuzzer's formats all come from here.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import re
import stat
from importlib import metadata
from pathlib import Path
from types import ModuleType

from profkit.core.errors import BadInput

ENTRY_POINT_GROUP = "profkit.parsers"
ROLES = ("timeline", "counters")
_DECLARED = ("FORMAT", "SUFFIXES", "ROLE", "SOURCE", "PREFERENCE", "DESCRIPTION", "sniff", "parse")
_registry: list[ModuleType] | None = None


def _check(mod: ModuleType) -> ModuleType:
    missing = [a for a in _DECLARED if not hasattr(mod, a)]
    if missing:
        raise TypeError(f"parser {mod.__name__} does not declare {', '.join(missing)}")
    if mod.ROLE not in ROLES:
        raise TypeError(f"parser {mod.__name__}: ROLE {mod.ROLE!r} is not one of {ROLES}")
    return mod


def _discover() -> list[ModuleType]:
    mods = [
        importlib.import_module(f"{__name__}.{m.name}")
        for m in pkgutil.iter_modules(__path__)
        if not m.name.startswith("_")
    ]
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        mods.append(importlib.import_module(ep.value))
    seen: dict[str, ModuleType] = {}
    for m in map(_check, mods):
        if m.FORMAT in seen and seen[m.FORMAT] is not m:
            raise TypeError(f"two parsers declare format {m.FORMAT!r}: {seen[m.FORMAT].__name__}, {m.__name__}")
        seen[m.FORMAT] = m
    return sorted(seen.values(), key=lambda m: (getattr(m, "SNIFF_ORDER", 50), m.FORMAT))


def registry() -> list[ModuleType]:
    """Every parser, in the order files are sniffed."""
    global _registry
    if _registry is None:
        _registry = _discover()
    return list(_registry)


def reload() -> list[ModuleType]:
    """Look for parsers again (after installing a package that adds one)."""
    global _registry
    _registry = None
    return registry()


def by_format(fmt: str) -> ModuleType:
    for p in registry():
        if p.FORMAT == fmt:
            return p
    raise KeyError(fmt)


def formats() -> list[str]:
    return [p.FORMAT for p in registry()]


def preference(role: str) -> list[str]:
    """Formats of one role, the one to take first first."""
    return [p.FORMAT for p in sorted((p for p in registry() if p.ROLE == role), key=lambda p: (p.PREFERENCE, p.FORMAT))]


def timeline_sources() -> tuple[str, ...]:
    """Tools whose launches form a timeline, preferred first (nsys before the CUPTI tracer)."""
    return tuple(dict.fromkeys(by_format(f).SOURCE for f in preference("timeline")))


def counter_sources() -> tuple[str, ...]:
    return tuple(dict.fromkeys(by_format(f).SOURCE for f in preference("counters")))


# profkit capture's own qualifiers before a suffix: run.nsys.sqlite, run_lean.raw.csv
_QUALIFIERS = ("nsys", "ncu", "cupti", "kineto", "raw", "details", "lean", "roofline", "full")


def suffix_pattern() -> re.Pattern:
    """Report suffixes (with capture's qualifiers) at the end of a file name."""
    ends = sorted({s.lower() for p in registry() for s in p.SUFFIXES}, key=len, reverse=True)
    return re.compile(r"(\.(" + "|".join(_QUALIFIERS) + r"))*(" + "|".join(map(re.escape, ends)) + r")$", re.I)


def detect(path: Path) -> ModuleType:
    """The parser module for a file, or BadInput naming what it is not."""
    path = Path(path)
    try:
        mode = os.stat(path).st_mode  # (follows a symlink: /dev/zero behind a report's name is refused)
    except FileNotFoundError:
        raise BadInput(path, "no such file") from None
    except OSError as e:
        raise BadInput(path, f"cannot read it ({e.strerror or e})") from None
    if stat.S_ISDIR(mode):
        raise BadInput(path, "is a directory")
    if not stat.S_ISREG(mode):  # reading a FIFO or a device never ends
        kind = (
            "a FIFO" if stat.S_ISFIFO(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "a socket"
        )
        raise BadInput(path, f"is {kind}, not a regular file")
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError as e:
        raise BadInput(path, f"cannot read it ({e.strerror or e})") from None
    if not head:
        raise BadInput(path, "empty file")
    for p in registry():
        if p.sniff(path, head):
            return p
    if head.startswith(b"SQLite format 3\x00"):
        raise BadInput(path, "an SQLite database, but not an Nsight Systems export (no StringIds / CUPTI tables)")
    raise BadInput(path, "unrecognised format (expected " + ", ".join(p.DESCRIPTION for p in registry()) + ")")


def prefetch(paths) -> None:
    """Let parsers that read slowly start on these files in the background (a parser module
    may define `prefetch(paths)`; ncu_rep reads reports in child processes). Files no parser
    recognises are left for parse() to refuse."""
    by: dict = {}
    for p in paths:
        try:
            mod = detect(Path(p))
        except Exception:  # noqa: BLE001 - refused later, with its reason
            continue
        if hasattr(mod, "prefetch"):
            by.setdefault(mod, []).append(p)
    for mod, files in by.items():
        mod.prefetch(files)
