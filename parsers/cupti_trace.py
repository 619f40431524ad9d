"""profkit's CUPTI trace (JSON lines written by profkit.capture.cupti_tracer): the fallback timeline.

Kernels, their launching runtime/driver calls (by correlation id) and NVTX markers, loaded
into the same rows as an nsys export.
"""

from __future__ import annotations

import json
from pathlib import Path

from profkit.core.errors import BadInput
from profkit.core.hostcalls import call_name, host_kind
from profkit.core.names import demangle, short_name
from profkit.core.nvtx import project, range_paths
from profkit.core.rows import SHARED_ID, Parsed, storable_text

FORMAT = "cupti-trace"
# what profkit.capture.cupti_tracer writes in its meta record; 2: the trace ends with
# {"type": "end", "records": N} (N = lines between meta and end), so a copy cut on a line
# boundary is refused; version 1 traces have no end record
TRACE_FORMAT = "profkit-cupti-trace"
TRACE_VERSION = 2
SUFFIXES = (".cupti.jsonl", ".jsonl")  # file name endings it reads (lower case)
ROLE = "timeline"  # timeline | counters
SOURCE = "cupti"  # the tool whose launches it yields (launch.source)
PREFERENCE = 30  # among parsers of one role, lower is taken first (analyse: one file per role)
SNIFF_ORDER = 40  # lower is asked first: the most specific recognisers first
DESCRIPTION = "profkit CUPTI trace (.cupti.jsonl)"
_START, _END = 1 << 1, 1 << 2  # CUPTI_ACTIVITY_FLAG_MARKER_START / _END


def sniff(path: Path, head: bytes) -> bool:
    return head.lstrip().startswith(b"{") and TRACE_FORMAT.encode() in head[:400]


_I64 = 1 << 63


def _int(v) -> bool:
    return type(v) is int and -_I64 <= v < _I64  # what an SQLite INTEGER holds (bool is no count)


def _dim3(v) -> bool:
    return isinstance(v, list) and len(v) == 3 and all(x is None or _int(x) for x in v)


_I, _S = (_int, "a 64-bit integer"), (storable_text, "a string")

# record type -> field -> (required, check, what it must be): the fields the parser reads, as
# profkit.capture.cupti_tracer writes them. Anything else in a record is ignored.
_FIELDS = {
    "meta": {
        "format": (True, *_S),
        "gpu_name": (False, *_S),
        "sm_count": (False, *_I),
        "memory_bytes": (False, *_I),
        "cc": (False, *_S),
        "host": (False, *_S),
        "argv": (False, lambda v: isinstance(v, list), "a list"),
    },
    "kernel": {
        "name": (True, *_S),
        "start": (True, *_I),
        "end": (True, *_I),
        "correlation_id": (False, *_I),
        "device": (False, *_I),
        "stream": (False, *_I),
        "registers_per_thread": (False, *_I),
        "static_shared_memory": (False, *_I),
        "dynamic_shared_memory": (False, *_I),
        "grid": (False, _dim3, "3 integers"),
        "block": (False, _dim3, "3 integers"),
    },
    "marker": {
        "id": (True, *_I),
        "timestamp": (True, *_I),
        "flags": (False, *_I),
        "name": (False, *_S),
        "domain": (False, *_S),
        "pid": (False, *_I),
        "tid": (False, *_I),
    },
}
_FIELDS["end"] = {"records": (True, *_I), "kernels": (False, *_I)}
_FIELDS["runtime"] = _FIELDS["driver"] = {
    "name": (False, *_S),
    "start": (True, *_I),
    "end": (True, *_I),
    "pid": (True, *_I),
    "tid": (True, *_I),
    "correlation_id": (False, *_I),
}


def _check(r: dict, fields: dict) -> str | None:
    """Why record r cannot be loaded, or None. Checked on reading, so nothing odd reaches the
    sort, the NVTX projection or SQLite (found by benchmarks/fuzz.py)."""
    for name, (required, ok, what) in fields.items():
        v = r.get(name)
        if v is None:
            if required:
                return f"no {name!r}"
        elif not ok(v):
            return f"{name!r} is not {what} ({str(v)[:40]!r})"
    if "start" in fields and "end" in fields and not _int(r["end"] - r["start"]):
        return "its duration does not fit 64 bits"
    if "start" in fields and "end" in fields and r["end"] < r["start"]:
        return "it ends before it starts"
    return None


V1_CAVEAT = (
    "a version 1 trace (profkit before end records): a copy cut exactly at a line end would look "
    "whole (cuts inside a line are refused)"
)


def parse(path: Path) -> Parsed:
    kernels_raw, markers = [], []
    calls: dict[object, dict] = {}  # by correlation id, as the trace wrote it
    host = []  # rows.HOST_CALL_FIELDS: the idle causes' calls (the tracer records no copies)
    header = end = None
    records = 0
    try:
        with open(path, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if not line.endswith("\n"):  # the tracer ends every line: a cut inside the last one
                    raise BadInput(path, f"truncated: line {n} is incomplete (no line end)")
                if not line.strip():
                    continue
                if end is not None:
                    raise BadInput(path, f"line {n}: a record after the end record")
                try:
                    r = json.loads(line)
                except json.JSONDecodeError as e:
                    raise BadInput(path, f"line {n}: not JSON ({e.msg}); is the trace truncated?") from None
                except (ValueError, RecursionError) as e:  # a number of 1M digits, nesting 100k deep
                    raise BadInput(path, f"line {n}: unreadable JSON ({str(e)[:80]})") from None
                if not isinstance(r, dict):
                    raise BadInput(path, f"line {n}: not a trace record")
                t = r.get("type")
                bad = _check(r, _FIELDS.get(t, {}) if isinstance(t, str) else {})
                if bad:
                    raise BadInput(path, f"line {n}: {t} record: {bad}")
                if t == "end":
                    end = r
                    continue
                if header is not None:
                    records += 1
                if t == "meta":
                    header = r
                elif t == "kernel":
                    kernels_raw.append(r)
                elif t in ("runtime", "driver"):
                    corr = r.get("correlation_id")
                    old = calls.get(corr) if corr is not None else None
                    if old is not None and old["type"] == t:
                        raise BadInput(path, f"line {n}: {t} record: {SHARED_ID} {corr} (one per kernel: corrupt)")
                    if old is None or t == "runtime":  # the runtime call wraps a driver one of the same id
                        calls[corr] = r
                    held = host_kind(call_name(str(r.get("name"))))
                    if held and type(r.get("start")) is int and type(r.get("end")) is int:
                        host.append(
                            (held, call_name(str(r.get("name"))), r["start"], r["end"], r.get("pid"), r.get("tid"))
                        )
                elif t == "marker":
                    markers.append(r)
    except UnicodeDecodeError as e:
        raise BadInput(path, f"not UTF-8 text ({e.reason})") from None
    if header is None or header.get("format") != TRACE_FORMAT:
        raise BadInput(path, "not a profkit CUPTI trace (no meta record)")
    version = header.get("version")
    caveat = None
    if end is not None:
        if end["records"] != records or (end.get("kernels") is not None and end["kernels"] != len(kernels_raw)):
            raise BadInput(
                path,
                f"the end record counts {end['records']} records and {end.get('kernels')} kernels, "
                f"the file holds {records} and {len(kernels_raw)}: records lost or added",
            )
    elif type(version) is int and version >= 2:
        raise BadInput(path, f"truncated: no end record after {records} records (the tracer writes one last)")
    else:
        caveat = V1_CAVEAT
    facts = {k: header.get(k) for k in ("gpu_name", "sm_count", "memory_bytes", "cc", "host", "argv")}
    out = timeline(path, FORMAT, SOURCE, kernels_raw, calls, markers, {k: v for k, v in facts.items() if v}, caveat)
    out.host_calls = sorted(host, key=lambda h: h[2])
    return out


def timeline(
    path: Path,
    fmt: str,
    source: str,
    kernels_raw: list[dict],
    calls: dict,
    markers: list[dict],
    facts: dict,
    caveat: str | None = None,
) -> Parsed:
    """The rows of CUPTI activity records, as this trace and nvprof's SQLite file both hold them:
    kernels (dicts of name, start, end, grid, block, ...), their launch calls by correlation id,
    NVTX markers (START/END pairs by id)."""
    try:
        ranges = _ranges(markers)
        kernels_raw.sort(key=lambda k: k["start"])
        proj_calls = []
        for i, k in enumerate(kernels_raw):
            c = calls.get(k.get("correlation_id"))
            if c:
                proj_calls.append((i, c["pid"], c["tid"], c["start"]))
        proj = project(ranges, proj_calls)
        kernels = []
        for i, k in enumerate(kernels_raw):
            c = calls.get(k.get("correlation_id")) or {}
            rng, p = proj.get(i, (None, None))
            g, b = k.get("grid") or [None] * 3, k.get("block") or [None] * 3
            name = demangle(k["name"])
            kernels.append(
                (
                    i,
                    name,
                    short_name(name),
                    rng,
                    p,
                    k["start"],
                    k["end"],
                    k["end"] - k["start"],
                    g[0],
                    g[1],
                    g[2],
                    b[0],
                    b[1],
                    b[2],
                    k.get("registers_per_thread"),
                    k.get("static_shared_memory"),
                    k.get("dynamic_shared_memory"),
                    k.get("stream"),
                    k.get("device"),
                    k.get("correlation_id"),
                    c.get("name"),
                    c.get("start"),
                    c.get("end"),
                    c.get("pid"),
                    c.get("tid"),
                )
            )
    except (KeyError, TypeError) as e:
        raise BadInput(path, f"a record lacks a required field ({e})") from None
    paths = range_paths(ranges)
    range_rows = [r + dp for r, dp in zip(ranges, paths)]
    return Parsed(str(path), fmt, source, kernels, range_rows, [], facts, caveat=caveat)


def _ranges(markers: list[dict]) -> list[tuple]:
    """Pair START/END markers by id into (domain, text, kind, start, end, pid, tid).

    CUPTI reports push/pop and start/end ranges alike as marker pairs; a pair whose end
    came on the thread it started on, nested within the thread's stack, is a push/pop range.
    """
    open_: dict[int, dict] = {}
    out = []
    for m in sorted(markers, key=lambda m: m["timestamp"]):
        flags = m.get("flags", 0)
        if flags & _START:
            open_[m["id"]] = m
        elif flags & _END and m["id"] in open_:
            s = open_.pop(m["id"])
            kind = "push_pop" if s.get("tid") == m.get("tid") else "start_end"
            out.append(
                (s.get("domain"), s.get("name"), kind, s["timestamp"], m["timestamp"], s.get("pid"), s.get("tid"))
            )
    for s in open_.values():  # never closed
        out.append((s.get("domain"), s.get("name"), "push_pop", s["timestamp"], None, s.get("pid"), s.get("tid")))
    return out
