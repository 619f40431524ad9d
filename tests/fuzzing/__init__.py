"""Fuzz every report parser through the real ingest, and count crashes, hangs and partial writes.

    python benchmarks/fuzz.py [--cases 10000] [--seed 1] [--workers 2] [--timeout 20]
                              [--out benchmarks/results/fuzz.json]
    python benchmarks/fuzz.py --replay '{"format": ..., "mutation": ..., ...}'   # one case, in-process

Hypothesis draws each case: a real report from profiles/ or tests/data/ (the seed) and a
mutation of it (truncation, bit flips, byte insert/delete, another format's bytes under this
format's name, SQLite tables or columns dropped/renamed, NULL/huge/empty/mistyped values, text
re-encoded as latin-1/UTF-16/invalid UTF-8, CSV without units row or with extra columns or
enormous numbers, JSONL with bad lines or mistyped fields, Kineto JSON with mistyped event
fields, missing keys, shuffled or oddly nested events; hostile SQLite exports; cuts at each
format's framing boundaries). Cases are drawn in this process and
run in worker subprocesses, so a hang (over --timeout) or a dying worker is counted, not fatal.

Each case runs `profkit.store.ingest.ingest` (what `profkit ingest` calls) on the mutated file into
a copy of a database that already holds a run, then counts:
- crash: any exception that is not a profkit ProfkitError, or the worker dying;
- hang: no answer within --timeout seconds (the worker is killed and replaced);
- partial write: a failed ingest changed any table, or a successful one added anything but one
  whole file (its launch/range/counter rows = its report_file counts) or touched older rows;
- silent partial load: a truncated copy of a seed (any byte, or a framing boundary: a whole
  .ncu-rep block, SQLite page, line, JSON object, also inside a valid .xz/.gz) loaded with fewer
  launches, ranges or counters than the whole seed and no caveat from its parser;
- input changed / sidecar files: the report's bytes changed, or files appeared beside it;
- mixed load: a file replaced while ingest read it (after detection, after parsing, or as the
  store starts writing; renamed over, rewritten, rewritten at its size, appended to) loaded as
  anything but one of the two files whole (its hash and its rows' counts);
- secret leak: a credential planted where a report records a command line or an environment
  (nsys capture rows, the CUPTI trace's argv and env, Kineto's distributedInfo) appears, even
  12 characters of it, in any table of the database or in the message.
It also counts error messages over one line, temporary files left behind, and loads that
carried their parser's caveat (what a format cannot prove).
"""
from __future__ import annotations

import importlib.metadata
import os
import platform
import sqlite3
import time
from collections import Counter, defaultdict
from datetime import date

from .cases import (  # noqa: F401 (the tests read them)
    BYTE_MUTATIONS,
    CSV_MUTATIONS,
    FORMATS,
    HOSTILE,
    JSON_MUTATIONS,
    JSONL_MUTATIONS,
    SQLITE_MUTATIONS,
    TRUNCATIONS,
    draw_cases,
)
from .invariants import snapshot  # noqa: F401
from .pool import make_template, run_case, run_cases  # noqa: F401


def summarise(cases: list[dict], results: list[dict], seconds: float, args: dict) -> dict:
    by_id = {c["id"]: c for c in cases}
    per_fmt: dict = defaultdict(Counter)
    per_mut: dict = defaultdict(Counter)
    crashes, hangs, partial, multiline, temp_left, not_built = [], [], [], [], [], []
    silent, changed, sidecar, caveated = [], [], [], Counter()
    mixed, leaks, replaced = [], [], Counter()
    outcomes = Counter()
    errors = Counter()
    column_path = 0
    for r in results:
        c = by_id[r["id"]]
        column_path += bool(c.get("column_path"))
        per_fmt[c["format"]][r["outcome"]] += 1
        per_mut[f"{c['format']}/{c['mutation']}"][r["outcome"]] += 1
        outcomes[r["outcome"]] += 1
        if r["outcome"] == "crash":
            crashes.append({"where": r.get("where"), "error": r.get("error"), "case": c,
                            "traceback": r.get("traceback", "")[-1500:]})
        if r["outcome"] == "hang":
            hangs.append({"case": c})
        if r.get("partial"):
            partial.append({"problem": r["partial"], "case": c})
        if r.get("multiline"):
            multiline.append({"error": r.get("error"), "case": c})
        if r.get("temp_left"):
            temp_left.append({"files": r["temp_left"], "case": c})
        if r["outcome"] == "not_built":
            not_built.append({"error": r.get("error"), "case": c})
        if r.get("silent_partial"):
            silent.append({"counts": r["silent_partial"], "case": c})
        if r.get("input_changed"):
            changed.append({"case": c})
        if r.get("sidecar"):
            sidecar.append({"files": r["sidecar"], "case": c})
        if r.get("replaced"):
            replaced[r["outcome"]] += 1
        if r.get("mixed_load"):
            mixed.append({"problem": r["mixed_load"], "case": c})
        if r.get("secret_leak"):
            leaks.append({"where": r["secret_leak"], "case": c})
        if r["outcome"] == "loaded" and r.get("caveat"):
            caveated[c["format"]] += 1
        if r["outcome"] == "rejected":
            errors[r["error"].split(":")[0]] += 1
    sig = Counter(f"{x['where']} {x['error'].split(':')[0]}" for x in crashes)
    built = len(results) - outcomes.get("not_built", 0)
    return {
        "date": date.today().isoformat(), "machine": f"{platform.machine()} VM, {os.cpu_count()} cores",
        "python": platform.python_version(), "sqlite": sqlite3.sqlite_version,
        "hypothesis": __import__("hypothesis").__version__, "ncu_report": _version("ncu-report"), "args": args,
        "code": code_under_test(),
        "cases": built, "cases_drawn": len(results), "seconds": round(seconds, 1),
        "crashes": len(crashes), "hangs": len(hangs), "partial_writes": len(partial),
        "silent_partial_loads": len(silent), "inputs_changed": len(changed), "sidecar_files": len(sidecar),
        "multiline_errors": len(multiline), "temp_files_left": len(temp_left),
        "mixed_loads": len(mixed), "secret_leaks": len(leaks),
        "replaced_mid_load": dict(replaced),
        "secret_cases": sum(1 for r in results if by_id[r["id"]]["mutation"] == "secret"),
        "loaded_with_caveat": dict(caveated), "column_path": column_path,
        "cases_per_s": round(len(results) / seconds, 2) if seconds else None,
        "outcomes": dict(outcomes), "rejections_by_error": dict(errors),
        "by_format": {k: dict(v) for k, v in sorted(per_fmt.items())},
        "by_mutation": {k: dict(v) for k, v in sorted(per_mut.items())},
        "crash_signatures": dict(sig.most_common()),
        "examples": {"crashes": _per_signature(crashes, 3), "hangs": hangs[:10], "partial_writes": partial[:10],
                     "silent_partial_loads": silent[:10], "inputs_changed": changed[:10], "sidecar_files": sidecar[:10],
                     "multiline_errors": multiline[:10], "temp_files_left": temp_left[:10],
                     "not_built": not_built[:10], "mixed_loads": mixed[:10], "secret_leaks": leaks[:10]},
    }


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def code_under_test() -> dict:
    """Where profkit's packages were imported from (the workers inherit this environment). An
    editable install maps profkit.parsers and profkit.kernels to its own checkout whatever
    sys.path says, so a campaign run from a copy of a commit must say which code it tried."""
    import profkit.kernels
    import profkit.parsers

    import profkit

    return {m.__name__: os.path.dirname(m.__file__ or "") for m in (profkit, profkit.parsers, profkit.kernels)}


def _per_signature(crashes: list[dict], k: int) -> list[dict]:
    """Up to k examples of each crash signature (where + exception type)."""
    seen: Counter = Counter()
    out = []
    for x in crashes:
        sig = f"{x['where']} {x['error'].split(':')[0]}"
        if seen[sig] < k:
            seen[sig] += 1
            out.append(x)
    return out


def fuzz(total: int, seed: int = 1, workers: int = 2, timeout: float = 20.0, derandomize: bool = False,
         progress=None, minutes: float | None = None) -> dict:
    """Draw and run `total` cases. They run in an order shuffled by `seed`, so that a campaign
    given `minutes` (no new case starts after them) is a sample of every format and mutation
    alike, not the first formats drawn."""
    import random

    t0 = time.perf_counter()
    cases = draw_cases(total, seed, derandomize)
    order = list(cases)
    random.Random(seed).shuffle(order)
    deadline = time.monotonic() + minutes * 60 if minutes else None
    results = run_cases(order, workers, timeout, progress, deadline)
    s = summarise(cases, results, time.perf_counter() - t0,
                  {"total": total, "seed": seed, "workers": workers, "timeout_s": timeout,
                   "derandomize": derandomize, "minutes": minutes})
    s["cases_planned"] = len(cases)
    s["stopped_at_time_limit"] = len(results) < len(cases)
    return s
