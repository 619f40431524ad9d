"""Fuzz every report parser through the real ingest, and count crashes, hangs and partial writes.

    python benchmarks/fuzz.py [--cases 10000] [--seed 1] [--workers 2] [--timeout 20]
                              [--out benchmarks/results/fuzz.json]
    python benchmarks/fuzz.py --replay '{"format": ..., "mutation": ..., ...}'   # one case, in-process

Hypothesis draws each case: a real report from profiles/ or tests/data/ (the seed) and a
mutation of it (truncation, bit flips, byte insert/delete, another format's bytes under this
format's name, SQLite tables or columns dropped/renamed, NULL/huge/empty/mistyped values, text
re-encoded as latin-1/UTF-16/invalid UTF-8, CSV without units row or with extra columns or
enormous numbers, JSONL with bad lines or mistyped fields). Cases are drawn in this process and
run in worker subprocesses, so a hang (over --timeout) or a dying worker is counted, not fatal.

Each case runs `profkit.ingest.ingest` (what `profkit ingest` calls) on the mutated file into
a copy of a database that already holds a run, then counts:
- crash: any exception that is not a profkit ProfkitError, or the worker dying;
- hang: no answer within --timeout seconds (the worker is killed and replaced);
- partial write: a failed ingest changed any table, or a successful one added anything but one
  whole file (its launch/range/counter rows = its source_file counts) or touched older rows.
It also counts error messages over one line and temporary files left behind.
"""
from __future__ import annotations

import argparse
import importlib.metadata
import io
import json
import lzma
import math
import os
import platform
import random
import selectors
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter, defaultdict
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# format -> (file name suffix, seeds). "!raw" = the .xz seed decompressed; "!head:N" = the
# first N data rows of a real CSV / JSONL (smaller seeds, faster cases, same real content).
FORMATS: dict[str, tuple[str, list[str]]] = {
    "nsys-sqlite": (".nsys.sqlite", [
        "tests/data/rmsnorm-cupti/rmsnorm-nsys.nsys.sqlite",
        "profiles/swiglu-llama8b-t4096/swiglu-llama8b-t4096.nsys.sqlite",
        "profiles/softmax-r32768-n4096/softmax-r32768-n4096.nsys.sqlite",
        "profiles/known/known.nsys.sqlite"]),
    "nsys-rep": (".nsys-rep", ["tests/data/known/known.nsys-rep"]),
    "ncu-rep": (".ncu-rep", [
        "profiles/matmul-llama8b-qkv-m4096/matmul-llama8b-qkv-m4096.ncu-rep.xz!raw"]),
    "ncu-rep-xz": (".ncu-rep.xz", [
        "profiles/matmul-llama8b-qkv-m4096/matmul-llama8b-qkv-m4096.ncu-rep.xz",
        "profiles/swiglu-llama8b-t4096/swiglu-llama8b-t4096.ncu-rep.xz"]),
    "ncu-csv": (".raw.csv", [
        "tests/data/known/full_rmsnorm_triton.raw.csv",
        "tests/data/known/full_gemm_cublas_bf16_4096.raw.csv",
        "tests/data/known/known_lean.raw.csv!head:12"]),
    "cupti-jsonl": (".cupti.jsonl", [
        "tests/data/rmsnorm-cupti/rmsnorm-cupti.cupti.jsonl",
        "tests/data/known/known.cupti.jsonl!head:1200"]),
}
# the database each case starts from: one run with a timeline and linked ncu counters
BASE_FILES = ["profiles/swiglu-llama8b-t4096/swiglu-llama8b-t4096.nsys.sqlite",
              "profiles/swiglu-llama8b-t4096/swiglu-llama8b-t4096.ncu-rep.xz"]
BASE_RUN = "base"

BYTE_MUTATIONS = ["truncate", "bitflip", "insert", "delete", "huge_insert", "empty", "wrong_format"]
TEXT_MUTATIONS = ["encoding"]
SQLITE_MUTATIONS = ["drop_table", "rename_table", "drop_column", "rename_column", "set_value", "delete_rows",
                    "duplicate_rows", "utf16_db"]
CSV_MUTATIONS = ["drop_units_row", "extra_columns", "drop_column", "set_cell", "enormous_row", "ragged_row",
                 "header_only", "duplicate_header", "line_noise"]
JSONL_MUTATIONS = ["bad_line", "drop_meta", "field_type", "drop_field", "add_markers", "shuffle_lines"]


def mutations_of(fmt: str) -> list[str]:
    out = list(BYTE_MUTATIONS)
    if fmt == "nsys-sqlite":
        out += SQLITE_MUTATIONS
    if fmt in ("ncu-csv", "cupti-jsonl"):
        out += TEXT_MUTATIONS
    if fmt == "ncu-csv":
        out += CSV_MUTATIONS
    if fmt == "cupti-jsonl":
        out += JSONL_MUTATIONS
    if fmt == "ncu-rep-xz":
        out += ["raw_then_xz"]  # mutate the report inside, then compress: a valid xz stream of bad bytes
    return out


# share of the cases each format gets (ncu-rep goes through NVIDIA's native reader: slowest)
WEIGHTS = {"nsys-sqlite": 0.32, "nsys-rep": 0.03, "ncu-rep": 0.13, "ncu-rep-xz": 0.10, "ncu-csv": 0.21,
           "cupti-jsonl": 0.21}

# nasty values, by tag (JSON-able case descriptions; the worker turns tags into values)
SQL_VALUES = ["null", "empty", "huge_text", "max_int", "min_int", "zero", "negative", "float", "inf", "nan",
              "text", "blob", "bad_utf8", "latin1", "huge_blob"]
CSV_VALUES = ["1e999", "-1e999", "99999999999999999999999999999", "-99999999999999999999999999999", "nan", "NaN",
              "inf", "-inf", "", "n/a", "1,2,3", "--", "0x1F", "1e-400", "١٢٣", "9" * 400, "HUGE_FIELD", '"', "\x00"]
JSON_VALUES = ["null", "empty", "huge_text", "int70", "neg_int70", "int63", "negative", "float", "true", "list0",
               "list1", "list4", "dict", "nan", "inf", "str_num", "nested", "surrogate", "unicode"]
SQLITE_TABLES = ["StringIds", "CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS",
                 "TARGET_INFO_GPU", "META_DATA_EXPORT", "META_DATA_CAPTURE"]
# the columns parsers/nsys_sqlite.py reads: half the column mutations aim at these
SQLITE_READ = [[t, c] for t, cs in {
    "CUPTI_ACTIVITY_KIND_KERNEL": ["start", "end", "correlationId", "globalPid", "demangledName", "shortName", "gridX",
                                   "gridY", "blockX", "registersPerThread", "streamId", "deviceId"],
    "CUPTI_ACTIVITY_KIND_RUNTIME": ["start", "end", "globalTid", "correlationId", "nameId"],
    "NVTX_EVENTS": ["start", "end", "eventType", "text", "textId", "domainId", "globalTid"],
    "StringIds": ["id", "value"], "TARGET_INFO_GPU": ["name", "smCount", "uuid", "id"],
    "META_DATA_CAPTURE": ["name", "value"], "META_DATA_EXPORT": ["name", "value"]}.items() for c in cs]
JSON_TYPES = ["meta", "kernel", "runtime", "driver", "marker"]
JSON_FIELDS = ["type", "format", "name", "start", "end", "correlation_id", "pid", "tid", "grid", "block", "stream",
               "device", "registers_per_thread", "static_shared_memory", "dynamic_shared_memory", "id", "flags",
               "timestamp", "domain", "gpu_name", "sm_count", "argv"]
BAD_LINES = ["garbage", "truncated", "array", "number", "string", "null", "empty_obj", "nan_literal", "deep",
             "binary", "no_type"]
ENCODINGS = ["latin-1", "cp1252", "utf-16", "utf-16-le", "utf-8-sig", "invalid-utf8", "nul-bytes"]


# --- seeds ------------------------------------------------------------------------------------

def seed_bytes(spec: str, _cache: dict = {}) -> bytes:
    if spec in _cache:
        return _cache[spec]
    path, _, how = spec.partition("!")
    data = (ROOT / path).read_bytes()
    if how == "raw":
        data = lzma.decompress(data)
    elif how.startswith("head:"):
        n = int(how[5:])
        lines = data.splitlines(keepends=True)
        keep = 2 if path.endswith(".csv") else 0  # CSV: names and units rows
        data = b"".join(lines[: keep + n])
    _cache[spec] = data
    return data


def sqlite_columns() -> list[tuple[str, str]]:
    """(table, column) pairs of the interesting tables of the nsys seeds."""
    pairs = set()
    for spec in FORMATS["nsys-sqlite"][1]:
        c = sqlite3.connect(f"{(ROOT / spec).as_uri()}?mode=ro", uri=True)
        for t in SQLITE_TABLES:
            pairs.update((t, r[1]) for r in c.execute(f'PRAGMA table_info("{t}")'))
        c.close()
    return sorted(pairs)


# --- case generation (hypothesis) --------------------------------------------------------------

def strategy(fmt: str, mutation: str):
    from hypothesis import strategies as st

    seeds = FORMATS[fmt][1]
    frac = st.floats(0, 1, allow_nan=False)
    rng = st.integers(0, 2**32 - 1)
    cols = st.one_of(st.sampled_from(SQLITE_READ), st.sampled_from(_SQLITE_COLS or SQLITE_READ))
    p = {
        "truncate": st.fixed_dictionaries({"frac": frac}),
        "bitflip": st.fixed_dictionaries({"n": st.integers(1, 32), "zone": st.sampled_from(["any", "head", "tail"]),
                                          "rng": rng}),
        "insert": st.fixed_dictionaries({"frac": frac, "data": st.binary(min_size=1, max_size=64).map(bytes.hex)}),
        "delete": st.fixed_dictionaries({"frac": frac, "len": st.integers(1, 8192)}),
        "huge_insert": st.fixed_dictionaries({"frac": frac, "size": st.sampled_from([1 << 16, 1 << 20, 8 << 20]),
                                              "byte": st.integers(0, 255)}),
        "empty": st.fixed_dictionaries({"fill": st.sampled_from(["", " ", "\n", "\x00" * 16])}),
        "wrong_format": st.fixed_dictionaries({"other": st.sampled_from(
            [s for f, (_, ss) in FORMATS.items() if f != fmt for s in ss]), "frac": st.sampled_from([1.0, 0.5, 0.01])}),
        "encoding": st.fixed_dictionaries({"enc": st.sampled_from(ENCODINGS), "rng": rng}),
        "raw_then_xz": st.fixed_dictionaries({"inner": st.sampled_from(["truncate", "bitflip", "insert", "delete"]),
                                              "frac": frac, "n": st.integers(1, 32), "rng": rng}),
        # SQLite
        "drop_table": st.fixed_dictionaries({"table": st.sampled_from(SQLITE_TABLES)}),
        "rename_table": st.fixed_dictionaries({"table": st.sampled_from(SQLITE_TABLES),
                                               "to": st.sampled_from(["_V2", "_V3", "_old", "lower", "x"])}),
        "drop_column": st.fixed_dictionaries({"col": cols}),
        "rename_column": st.fixed_dictionaries({"col": cols}),
        "set_value": st.fixed_dictionaries({"col": cols, "value": st.sampled_from(SQL_VALUES),
                                            "rows": st.sampled_from(["all", "one", "half"]), "rng": rng}),
        "delete_rows": st.fixed_dictionaries({"table": st.sampled_from(SQLITE_TABLES),
                                              "rows": st.sampled_from(["all", "one", "half"]), "rng": rng}),
        "duplicate_rows": st.fixed_dictionaries({"table": st.sampled_from(SQLITE_TABLES)}),
        "utf16_db": st.fixed_dictionaries({"enc": st.sampled_from(["UTF-16le", "UTF-16be"])}),
        # CSV
        "drop_units_row": st.fixed_dictionaries({}),
        "extra_columns": st.fixed_dictionaries({"n": st.integers(1, 5), "where": st.sampled_from(
            ["all", "header", "units", "data"]), "rng": rng}),
        "set_cell": st.fixed_dictionaries({"row": frac, "col": frac, "value": st.sampled_from(CSV_VALUES)}),
        "enormous_row": st.fixed_dictionaries({"row": frac, "value": st.sampled_from(CSV_VALUES[:8])}),
        "ragged_row": st.fixed_dictionaries({"row": frac, "cut": st.integers(1, 50)}),
        "header_only": st.fixed_dictionaries({"units": st.booleans()}),
        "duplicate_header": st.fixed_dictionaries({"rng": rng}),
        "line_noise": st.fixed_dictionaries({"kind": st.sampled_from(["crlf", "bom", "unbalanced_quote", "blank_lines",
                                                                        "cr_only", "tabs"]), "rng": rng}),
        # JSONL
        "bad_line": st.fixed_dictionaries({"kind": st.sampled_from(BAD_LINES), "frac": frac}),
        "drop_meta": st.fixed_dictionaries({"how": st.sampled_from(["drop", "wrong_format", "not_first", "twice"])}),
        "field_type": st.fixed_dictionaries({"type": st.sampled_from(JSON_TYPES), "field": st.sampled_from(JSON_FIELDS),
                                             "value": st.sampled_from(JSON_VALUES), "which": frac}),
        "drop_field": st.fixed_dictionaries({"type": st.sampled_from(JSON_TYPES), "field": st.sampled_from(JSON_FIELDS),
                                             "which": frac}),
        "add_markers": st.fixed_dictionaries({"n": st.integers(1, 40), "corrupt": st.sampled_from(
            ["none", "unpaired", "same_id", "reversed", "other_thread", "huge_ts", "bad_flags"]), "rng": rng}),
        "shuffle_lines": st.fixed_dictionaries({"rng": rng, "dup": st.booleans()}),
    }[mutation]
    if mutation == "drop_column" and fmt == "ncu-csv":
        p = st.fixed_dictionaries({"col": frac})
    return st.fixed_dictionaries({
        "format": st.just(fmt), "mutation": st.just(mutation), "seed": st.sampled_from(seeds), "p": p,
        "into_existing_run": st.booleans(),
    })


_SQLITE_COLS: list = []


def draw_cases(total: int, seed: int, derandomize: bool = False) -> list[dict]:
    """About `total` distinct cases, split by WEIGHTS over formats and evenly over each
    format's mutations. A mutation with few distinct cases (e.g. `empty`) gives what it has;
    later rounds (other seeds) top the others up."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hseed

    _SQLITE_COLS[:] = [list(x) for x in sqlite_columns()]
    seen: set[str] = set()
    cases: list[dict] = []
    share = {(f, m): total * w / len(mutations_of(f)) for f, w in WEIGHTS.items() for m in mutations_of(f)}
    want = {k: max(1, round(v)) for k, v in share.items()}
    have: Counter = Counter()
    open_ = list(want)
    for rnd in range(1 if derandomize else 4):
        short = total - len(cases)
        if short <= 0:
            break
        if rnd:  # mutations with few distinct cases (`empty`...) gave what they have: top up the others
            open_ = [k for k in open_ if have[k] >= want[k]]
            w = sum(share[k] for k in open_)
            want = {k: have[k] + (math.ceil(short * share[k] / w) if k in open_ else 0) for k in want}
        for (fmt, mut) in open_:
            n = want[(fmt, mut)] - have[(fmt, mut)]
            got: list[dict] = []

            # hypothesis repeats itself (it favours boundary values): ask for twice as many
            @settings(max_examples=2 * n, database=None, deadline=None, derandomize=derandomize,
                      phases=[Phase.generate], suppress_health_check=list(HealthCheck))
            @given(strategy(fmt, mut))
            def collect(case):
                got.append(case)

            if not derandomize:
                collect = hseed(seed * 100_003 + rnd * 1009 + len(cases))(collect)
            collect()
            for case in got:
                key = json.dumps(case, sort_keys=True)
                if key not in seen and have[(fmt, mut)] < want[(fmt, mut)]:
                    seen.add(key)
                    cases.append(case)
                    have[(fmt, mut)] += 1
    for i, c in enumerate(cases):
        c["id"] = i
    return cases


# --- mutations (worker side) -------------------------------------------------------------------

def _sql_value(tag: str):
    return {"null": None, "empty": "", "huge_text": "x" * 2_000_000, "max_int": 2**63 - 1, "min_int": -2**63,
            "zero": 0, "negative": -123456789, "float": 1.5, "inf": float("inf"), "nan": float("nan"),
            "text": "abc", "blob": b"\x00\xff\xfe", "huge_blob": b"\xff" * 1_000_000,
            "bad_utf8": b"\xff\xfe caf\xc3", "latin1": "café Prüfung".encode("latin-1")}[tag]


def _json_value(tag: str):
    return {"null": None, "empty": "", "huge_text": "x" * 2_000_000, "int70": 2**70, "neg_int70": -2**70,
            "int63": 2**63, "negative": -5, "float": 1.5, "true": True, "list0": [], "list1": [1],
            "list4": [1, 2, 3, 4], "dict": {"a": 1}, "nan": float("nan"), "inf": float("inf"), "str_num": "1234",
            "nested": [[[[[]]]]], "surrogate": "k\udce1", "unicode": "報告 ñ"}[tag]


def _rows_where(rows: str, rng: random.Random) -> str:
    return {"all": "1", "one": "rowid = (SELECT min(rowid) FROM {t})", "half": f"(rowid + {rng.randrange(2)}) % 2 = 0"}[rows]


def _rebuild_loose(c: sqlite3.Connection, t: str, cols: list[str] | None = None) -> None:
    """Rebuild table t without constraints (so NULLs and wrong types can go in), keeping `cols`."""
    have = [r[1] for r in c.execute(f'PRAGMA table_info("{t}")')]
    keep = [x for x in have if cols is None or x in cols]
    c.execute(f'CREATE TABLE "__tmp" AS SELECT {", ".join(chr(34) + x + chr(34) for x in keep) or "NULL AS x"} FROM "{t}"')
    c.execute(f'DROP TABLE "{t}"')
    c.execute(f'ALTER TABLE "__tmp" RENAME TO "{t}"')


def _exists(c, t: str) -> bool:
    return c.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (t,)).fetchone() is not None


def mutate_sqlite(path: Path, mutation: str, p: dict) -> None:
    rng = random.Random(p.get("rng", 0))
    if mutation == "utf16_db":
        src = path.with_suffix(".orig")
        path.rename(src)
        c, o = sqlite3.connect(path), sqlite3.connect(src)  # (ATTACH needs one encoding: copy rows)
        c.execute(f"PRAGMA encoding = '{p['enc']}'")
        for (name, sql) in o.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'").fetchall():
            c.execute(sql)
            rows = o.execute(f'SELECT * FROM "{name}"').fetchall()
            if rows:
                c.executemany(f'INSERT INTO "{name}" VALUES ({", ".join("?" * len(rows[0]))})', rows)
        c.commit()
        c.close()
        o.close()
        src.unlink()
        return
    c = sqlite3.connect(path)
    c.execute("PRAGMA journal_mode = DELETE")
    if mutation in ("drop_column", "rename_column", "set_value"):
        t, col = p["col"]
    else:
        t, col = p.get("table"), None
    if not _exists(c, t):
        c.close()
        return
    if mutation == "drop_table":
        c.execute(f'DROP TABLE "{t}"')
    elif mutation == "rename_table":
        new = {"_V2": t + "_V2", "_V3": t + "_V3", "_old": t + "_old", "lower": t.lower() + "_", "x": "x"}[p["to"]]
        c.execute(f'ALTER TABLE "{t}" RENAME TO "{new}"')
    elif mutation == "drop_column":
        _rebuild_loose(c, t, [x[1] for x in c.execute(f'PRAGMA table_info("{t}")') if x[1] != col])
    elif mutation == "rename_column":
        c.execute(f'ALTER TABLE "{t}" RENAME COLUMN "{col}" TO "{col}_renamed"')
    elif mutation == "set_value":
        _rebuild_loose(c, t)
        where = _rows_where(p["rows"], rng).format(t=f'"{t}"')
        if p["value"].startswith("huge"):  # 1-2 MB in at most 3 rows: thousands would make a multi-GB file
            where = f'rowid IN (SELECT rowid FROM "{t}" WHERE {where} ORDER BY rowid LIMIT 3)'
        c.execute(f'UPDATE "{t}" SET "{col}" = ? WHERE {where}', (_sql_value(p["value"]),))
    elif mutation == "delete_rows":
        c.execute(f'DELETE FROM "{t}" WHERE ' + _rows_where(p["rows"], rng).format(t=f'"{t}"'))
    elif mutation == "duplicate_rows":
        _rebuild_loose(c, t)
        c.execute(f'INSERT INTO "{t}" SELECT * FROM "{t}"')
    c.commit()
    c.close()


def _reencode(text: str, enc: str, rng: random.Random) -> bytes:
    if enc in ("latin-1", "cp1252", "invalid-utf8", "nul-bytes"):
        # put non-ASCII (or NUL) characters into a few random places, then encode
        chars = list(text)
        for _ in range(5):
            i = rng.randrange(len(chars) + 1)
            chars.insert(i, {"latin-1": "é", "cp1252": "€", "invalid-utf8": "\udcff", "nul-bytes": "\x00"}[enc])
        text = "".join(chars)
        if enc == "invalid-utf8":
            return text.encode("utf-8", "surrogateescape")
        return text.encode("utf-8" if enc == "nul-bytes" else enc)
    return text.encode(enc)


def mutate_csv(data: bytes, mutation: str, p: dict) -> bytes:
    import csv

    rng = random.Random(p.get("rng", 0))
    rows = list(csv.reader(io.StringIO(data.decode("utf-8"))))
    idx = lambda frac, n: min(int(frac * n), n - 1)  # noqa: E731
    if mutation == "drop_units_row":
        del rows[1]
    elif mutation == "extra_columns":
        for i, r in enumerate(rows):
            if p["where"] == "all" or (p["where"], i) in (("header", 0), ("units", 1)) or (p["where"] == "data" and i >= 2):
                r.extend(f"extra{rng.randrange(1000)}" if i == 0 else str(rng.random()) for _ in range(p["n"]))
    elif mutation == "drop_column":
        j = idx(p["col"], len(rows[0]))
        for r in rows:
            if j < len(r):
                del r[j]
    elif mutation in ("set_cell", "enormous_row"):
        i = 2 + idx(p["row"], max(1, len(rows) - 2)) if len(rows) > 2 else len(rows) - 1
        v = "1" * 200_000 if p["value"] == "HUGE_FIELD" else p["value"]
        if mutation == "set_cell":
            rows[i][idx(p["col"], len(rows[i]))] = v
        else:
            rows[i] = [c if k < 13 else v for k, c in enumerate(rows[i])]
    elif mutation == "ragged_row":
        i = 2 + idx(p["row"], max(1, len(rows) - 2)) if len(rows) > 2 else len(rows) - 1
        rows[i] = rows[i][: max(0, len(rows[i]) - p["cut"])]
    elif mutation == "header_only":
        rows = rows[:2] if p["units"] else rows[:1]
    elif mutation == "duplicate_header":
        j = rng.randrange(len(rows[0]))
        k = rng.randrange(len(rows[0]))
        rows[0][k] = rows[0][j]
    out = io.StringIO()
    csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(rows)
    text = out.getvalue()
    if mutation == "line_noise":
        kind = p["kind"]
        if kind == "crlf":
            text = text.replace("\n", "\r\n")
        elif kind == "bom":
            text = "\ufeff" + text
        elif kind == "unbalanced_quote":
            i = rng.randrange(len(text))
            text = text[:i] + '"' + text[i:]
        elif kind == "blank_lines":
            text = text.replace("\n", "\n\n")
        elif kind == "cr_only":
            text = text.replace("\n", "\r")
        elif kind == "tabs":
            text = text.replace('","', '"\t"')
    return text.encode("utf-8")


def _bad_line(kind: str) -> str:
    return {"garbage": "}{ not json", "truncated": '{"type": "kernel", "name": "k", "start": 12',
            "array": "[1, 2, 3]", "number": "42", "string": '"kernel"', "null": "null", "empty_obj": "{}",
            "nan_literal": '{"type": "kernel", "start": NaN, "end": Infinity, "name": "k"}',
            "deep": "[" * 100_000 + "]" * 100_000, "binary": "\x00\x01\x02\x7f",
            "no_type": '{"name": "k", "start": 1, "end": 2}'}[kind]


def mutate_jsonl(data: bytes, mutation: str, p: dict) -> bytes:
    rng = random.Random(p.get("rng", 0))
    lines = data.decode("utf-8").splitlines()
    recs = [json.loads(x) for x in lines]
    if mutation == "bad_line":
        i = int(p["frac"] * len(lines))
        lines.insert(i, _bad_line(p["kind"]))
        return ("\n".join(lines) + "\n").encode("utf-8", "surrogateescape")
    if mutation == "drop_meta":
        meta = recs.pop(0)
        if p["how"] == "wrong_format":
            recs.insert(0, dict(meta, format="something-else"))
        elif p["how"] == "not_first":
            recs.insert(len(recs) // 2, meta)
        elif p["how"] == "twice":
            recs.insert(0, meta)
            recs.insert(len(recs) // 2, dict(meta, gpu_name=None))
    elif mutation in ("field_type", "drop_field"):
        of = [r for r in recs if r.get("type") == p["type"]]
        if of:
            r = of[min(int(p["which"] * len(of)), len(of) - 1)]
            if mutation == "drop_field":
                r.pop(p["field"], None)
            else:
                r[p["field"]] = _json_value(p["value"])
    elif mutation == "add_markers":
        calls = [r for r in recs if r.get("type") in ("runtime", "driver")] or [{"start": 0, "end": 1, "pid": 1, "tid": 1}]
        for k in range(p["n"]):
            c = rng.choice(calls)
            s, e = c.get("start", 0) - rng.randrange(1, 1000), c.get("end", 0) + rng.randrange(1, 1000)
            mid = 10_000 + k
            start = {"type": "marker", "flags": 2, "id": mid, "timestamp": s, "name": f"range{k}", "domain": None,
                     "pid": c.get("pid"), "tid": c.get("tid")}
            end = {"type": "marker", "flags": 4, "id": mid, "timestamp": e, "pid": c.get("pid"), "tid": c.get("tid")}
            kind = p["corrupt"]
            if kind == "unpaired" and rng.random() < 0.5:
                end = None
            elif kind == "same_id":
                start["id"] = end["id"] = 7
            elif kind == "reversed":
                start["timestamp"], end["timestamp"] = e, s
            elif kind == "other_thread":
                end["tid"] = (c.get("tid") or 0) + 1
            elif kind == "huge_ts":
                start["timestamp"] = 2**64 + rng.randrange(100)
            elif kind == "bad_flags":
                start["flags"] = rng.choice([-1, 0, 6, "2", None, 2.0])
            recs += [x for x in (start, end) if x]
    elif mutation == "shuffle_lines":
        head = recs[:1]
        rest = recs[1:]
        rng.shuffle(rest)
        if p["dup"]:
            rest += rest[: len(rest) // 3]
        recs = head + rest
    return ("\n".join(json.dumps(r) for r in recs) + "\n").encode("utf-8")


def _bytes_mutation(data: bytes, mutation: str, p: dict) -> bytes:
    rng = random.Random(p.get("rng", 0))
    n = len(data)
    at = min(int(p.get("frac", 0) * n), n)
    if mutation == "truncate":
        return data[:at]
    if mutation == "bitflip":
        b = bytearray(data)
        lo, hi = {"any": (0, n), "head": (0, min(n, 4096)), "tail": (max(0, n - 4096), n)}[p["zone"]]
        for _ in range(p["n"]):
            if hi > lo:
                i = rng.randrange(lo, hi)
                b[i] ^= 1 << rng.randrange(8)
        return bytes(b)
    if mutation == "insert":
        return data[:at] + bytes.fromhex(p["data"]) + data[at:]
    if mutation == "delete":
        return data[:at] + data[at + p["len"]:]
    if mutation == "huge_insert":
        return data[:at] + bytes([p["byte"]]) * p["size"] + data[at:]
    raise ValueError(mutation)


def build_file(case: dict, folder: Path) -> Path:
    """Write the mutated file of `case` into `folder`; returns its path."""
    fmt, mut, p = case["format"], case["mutation"], case["p"]
    path = folder / ("case" + FORMATS[fmt][0])
    data = seed_bytes(case["seed"])
    if mut == "empty":
        data = p["fill"].encode()
    elif mut == "wrong_format":
        other = seed_bytes(p["other"])
        data = other[: max(1, int(len(other) * p["frac"]))]
    elif mut == "raw_then_xz":
        inner = {"frac": p["frac"], "n": p["n"], "rng": p["rng"], "zone": "any", "len": 1 + p["n"] * 64,
                 "data": bytes(random.Random(p["rng"]).randrange(256) for _ in range(p["n"])).hex()}
        raw = _bytes_mutation(lzma.decompress(data), p["inner"], inner)
        data = lzma.compress(raw, preset=0)
    elif mut == "encoding":
        data = _reencode(data.decode("utf-8"), p["enc"], random.Random(p["rng"]))
    elif mut in CSV_MUTATIONS and fmt == "ncu-csv":
        data = mutate_csv(data, mut, p)
    elif mut in JSONL_MUTATIONS:
        data = mutate_jsonl(data, mut, p)
    elif mut in SQLITE_MUTATIONS:
        path.write_bytes(data)
        mutate_sqlite(path, mut, p)
        return path
    else:
        data = _bytes_mutation(data, mut, p)
    path.write_bytes(data)
    return path


# --- database checks -----------------------------------------------------------------------------

def snapshot(db: Path) -> dict:
    """Every table's rows (sorted reprs) and the schema: what 'unchanged' is compared on."""
    c = sqlite3.connect(db)
    try:
        out = {"__schema__": sorted(c.execute("SELECT type, name, sql FROM sqlite_master").fetchall())}
        for (t,) in c.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'").fetchall():
            cols = [r[1] for r in c.execute(f'PRAGMA table_info("{t}")')]
            out[t] = (cols, sorted(repr(r) for r in c.execute(f'SELECT * FROM "{t}"')))
        return out
    finally:
        c.close()


def _rows(c: sqlite3.Connection, t: str, where: str = "", params=(), blank: tuple = ()) -> list[str]:
    """Sorted reprs of table t's rows (optionally filtered), columns in `blank` set to None."""
    cols = [r[1] for r in c.execute(f'PRAGMA table_info("{t}")')]
    sel = ", ".join("NULL" if x in blank else f'"{x}"' for x in cols)
    return sorted(repr(r) for r in c.execute(f'SELECT {sel} FROM "{t}" {where}', params))


def check_whole_file(db: Path, template: Path, run: str, existed: bool) -> str | None:
    """After a successful ingest: one new source_file whose rows are all there, older rows
    untouched (except the ncu->timeline links and metadata of the run it joined). None if ok."""
    c = sqlite3.connect(db)
    b = sqlite3.connect(template)
    try:
        if c.execute("PRAGMA integrity_check").fetchone()[0] != "ok":
            return "integrity_check failed"
        if c.execute("PRAGMA foreign_key_check").fetchall():
            return "foreign_key_check failed"
        old_ids = {r[0] for r in b.execute("SELECT id FROM source_file")}
        new = [r for r in c.execute("SELECT id, run, kernels, ranges, counters FROM source_file") if r[0] not in old_ids]
        if len(new) != 1:
            return f"{len(new)} new source_file rows"
        fid, frun, k, n, m = new[0]
        got = (c.execute("SELECT count(*) FROM launch WHERE file_id = ?", (fid,)).fetchone()[0],
               c.execute("SELECT count(*) FROM nvtx_range WHERE file_id = ?", (fid,)).fetchone()[0],
               c.execute("SELECT count(*) FROM counter WHERE launch_id IN (SELECT id FROM launch WHERE file_id = ?)",
                         (fid,)).fetchone()[0])
        if got != (k, n, m):
            return f"file {fid}: rows {got} != source_file counts {(k, n, m)}"
        if frun != run:
            return f"loaded into run {frun!r}, expected {run!r}"
        if existed and c.execute("SELECT count(*) FROM run").fetchone()[0] != b.execute("SELECT count(*) FROM run").fetchone()[0]:
            return "a run was added"
        for (t,) in b.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'").fetchall():
            cols = [r[1] for r in b.execute(f'PRAGMA table_info("{t}")')]
            where, params, blank = "", (), ()
            if "file_id" in cols:
                where = f"WHERE file_id IS NOT {fid}"
            elif t == "source_file":
                where = f"WHERE id != {fid}"
            elif t == "counter":
                where = f"WHERE launch_id NOT IN (SELECT id FROM launch WHERE file_id = {fid})"
            elif t == "run":
                where, params = ("WHERE run != ?", (run,)) if not existed else ("", ())
                blank = ("meta", "gpu_name") if existed else ()  # the run it joined may gain metadata
            if t == "launch" and existed:
                blank = ("timeline_id",)  # and its ncu launches are relinked to the timeline
            if _rows(c, t, where, params, blank) != _rows(b, t, where, params, blank):
                return f"older rows of table {t} changed"
        return None
    finally:
        c.close()
        b.close()


# --- worker ----------------------------------------------------------------------------------------

def run_case(case: dict, work: Path, template: Path, before: dict) -> dict:
    """Build, ingest, check one case. Runs in a worker process (or in-process for --replay)."""
    import profkit
    from profkit.errors import ProfkitError
    from profkit.ingest import ingest

    folder = work / f"c{case['id']}"
    folder.mkdir()
    tmp = work / "tmp"
    res = {"id": case["id"], "outcome": None}
    t0 = time.perf_counter()
    try:
        try:
            path = build_file(case, folder)
        except Exception as e:  # a mutation that does not apply to this seed: not a profkit case
            res.update(outcome="not_built", error=f"{type(e).__name__}: {e}"[:300])
            return res
        db = folder / "db.sqlite"
        shutil.copy(template, db)
        run = BASE_RUN if case["into_existing_run"] else None
        try:
            loaded = ingest(str(db), [path], run=run)
            res["outcome"] = "skipped" if loaded[0].skipped else "loaded"
            res["loaded"] = [loaded[0].kernels, loaded[0].ranges, loaded[0].counters]
        except ProfkitError as e:
            res["outcome"] = "rejected"
            res["error"] = f"{type(e).__name__}: {e}"[:300]
            res["multiline"] = "\n" in str(e).strip()
        except BaseException as e:  # noqa: BLE001 - that is what we count
            import profkit.parsers

            ours = (Path(profkit.__file__).resolve().parent, Path(profkit.parsers.__file__).resolve().parent)
            tb = traceback.extract_tb(e.__traceback__)  # the innermost frame in profkit's own code
            where = next((f"{Path(f.filename).name}:{f.lineno}" for f in reversed(tb)
                          if Path(f.filename).resolve().parent in ours), None)
            res.update(outcome="crash", error=f"{type(e).__name__}: {e}"[:300], where=where,
                       traceback="".join(traceback.format_exception(e))[-3000:])
        res["ingest_s"] = round(time.perf_counter() - t0, 4)
        # the database: unchanged after a failure, one whole new file after a success
        if res["outcome"] == "loaded":
            problem = check_whole_file(db, template, run or "case", existed=run is not None)
        else:
            problem = None if snapshot(db) == before else "database changed by a failed or skipped ingest"
        if problem:
            res["partial"] = problem
        leftovers = os.listdir(tmp)
        if leftovers:
            res["temp_left"] = leftovers[:5]
            for f in leftovers:
                shutil.rmtree(tmp / f, ignore_errors=True) if (tmp / f).is_dir() else (tmp / f).unlink()
        return res
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def make_template(work: Path) -> Path:
    from profkit.ingest import ingest

    db = work / "template.db"
    ingest(str(db), [ROOT / f for f in BASE_FILES], run=BASE_RUN)
    return db


def worker_main(work: str) -> None:
    work_p = Path(work)
    (work_p / "tmp").mkdir(exist_ok=True)
    os.environ["TMPDIR"] = str(work_p / "tmp")
    tempfile.tempdir = str(work_p / "tmp")
    try:  # a mutation that makes a reader allocate without bound must fail, not take the machine
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (8 << 30, 8 << 30))
    except (ImportError, ValueError, OSError):
        pass
    template = work_p / "template.db"
    before = snapshot(template)
    # the protocol gets its own copy of stdout; whatever the libraries print (Python or
    # native code) goes to stderr
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    out.write("ready\n")
    out.flush()
    for line in sys.stdin:
        case = json.loads(line)
        res = run_case(case, work_p, template, before)
        out.write(json.dumps(res) + "\n")
        out.flush()


# --- parent: pool of workers with a per-case time limit --------------------------------------------

class Worker:
    def __init__(self, work: Path, template: Path, n: int):
        self.dir = work / f"w{n}"
        shutil.rmtree(self.dir, ignore_errors=True)
        self.dir.mkdir(parents=True)
        shutil.copy(template, self.dir / "template.db")
        env = dict(os.environ, PYTHONHASHSEED="0")
        self.proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--worker", str(self.dir)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     text=True, bufsize=1, env=env, cwd=str(self.dir))
        assert self.proc.stdout.readline().strip() == "ready"
        self.case: dict | None = None
        self.deadline = 0.0

    def send(self, case: dict, timeout: float) -> None:
        self.case, self.deadline = case, time.monotonic() + timeout
        self.proc.stdin.write(json.dumps(case) + "\n")
        self.proc.stdin.flush()

    def kill(self) -> None:
        try:
            self.proc.kill()
        except OSError:
            pass
        self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def run_cases(cases: list[dict], workers: int = 2, timeout: float = 20.0, progress=None) -> list[dict]:
    results: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="profkit-fuzz-") as d:
        work = Path(d)
        template = make_template(work)
        pool = [Worker(work, template, i) for i in range(workers)]
        spawned = workers
        sel = selectors.DefaultSelector()
        for w in pool:
            sel.register(w.proc.stdout, selectors.EVENT_READ, w)
        todo = list(reversed(cases))

        def replace(w: Worker) -> Worker:
            nonlocal spawned
            sel.unregister(w.proc.stdout)
            w.kill()
            nw = Worker(work, template, spawned)
            spawned += 1
            sel.register(nw.proc.stdout, selectors.EVENT_READ, nw)
            pool[pool.index(w)] = nw
            return nw

        for w in pool:
            if todo:
                w.send(todo.pop(), timeout)
        while any(w.case for w in pool):
            now = time.monotonic()
            wait = max(0.05, min(w.deadline for w in pool if w.case) - now)
            for key, _ in sel.select(wait):
                w = key.data
                line = w.proc.stdout.readline()
                try:
                    res = json.loads(line) if line else None
                except ValueError:  # something wrote into the protocol: count it against the case
                    res = {"id": w.case["id"], "outcome": "crash", "error": f"garbage from worker: {line[:200]!r}",
                           "where": "worker"}
                    w = replace(w)
                if res is None:  # the worker died inside a case: a crash (signal or abort in native code)
                    rc = w.proc.wait()
                    res = {"id": w.case["id"], "outcome": "crash", "error": f"worker died (exit {rc})",
                           "where": "worker"}
                    w = replace(w)
                w.case = None
                results.append(res)
                if progress:
                    progress(len(results), len(cases))
                if todo:
                    w.send(todo.pop(), timeout)
            now = time.monotonic()
            for w in list(pool):
                if w.case and now > w.deadline:
                    results.append({"id": w.case["id"], "outcome": "hang", "error": f"no answer in {timeout} s"})
                    nw = replace(w)
                    if todo:
                        nw.send(todo.pop(), timeout)
        for w in pool:
            sel.unregister(w.proc.stdout)
            w.proc.stdin.close()
            w.kill()
    return results


def summarise(cases: list[dict], results: list[dict], seconds: float, args: dict) -> dict:
    by_id = {c["id"]: c for c in cases}
    per_fmt: dict = defaultdict(Counter)
    per_mut: dict = defaultdict(Counter)
    crashes, hangs, partial, multiline, temp_left, not_built = [], [], [], [], [], []
    outcomes = Counter()
    errors = Counter()
    for r in results:
        c = by_id[r["id"]]
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
        if r["outcome"] == "rejected":
            errors[r["error"].split(":")[0]] += 1
    sig = Counter(f"{x['where']} {x['error'].split(':')[0]}" for x in crashes)
    built = len(results) - outcomes.get("not_built", 0)
    return {
        "date": date.today().isoformat(), "machine": f"{platform.machine()} VM, {os.cpu_count()} cores",
        "python": platform.python_version(), "sqlite": sqlite3.sqlite_version,
        "hypothesis": __import__("hypothesis").__version__, "ncu_report": _version("ncu-report"), "args": args,
        "cases": built, "cases_drawn": len(results), "seconds": round(seconds, 1),
        "crashes": len(crashes), "hangs": len(hangs), "partial_writes": len(partial),
        "multiline_errors": len(multiline), "temp_files_left": len(temp_left),
        "outcomes": dict(outcomes), "rejections_by_error": dict(errors),
        "by_format": {k: dict(v) for k, v in sorted(per_fmt.items())},
        "by_mutation": {k: dict(v) for k, v in sorted(per_mut.items())},
        "crash_signatures": dict(sig.most_common()),
        "examples": {"crashes": _per_signature(crashes, 3), "hangs": hangs[:10], "partial_writes": partial[:10],
                     "multiline_errors": multiline[:10], "temp_files_left": temp_left[:10],
                     "not_built": not_built[:10]},
    }


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


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
         progress=None) -> dict:
    t0 = time.perf_counter()
    cases = draw_cases(total, seed, derandomize)
    results = run_cases(cases, workers, timeout, progress)
    return summarise(cases, results, time.perf_counter() - t0,
                     {"total": total, "seed": seed, "workers": workers, "timeout_s": timeout,
                      "derandomize": derandomize})


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=20.0)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "fuzz.json"))
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--replay", help="run one case (JSON) in this process and print the result")
    a = ap.parse_args()
    if a.worker:
        worker_main(a.worker)
        return 0
    if a.replay:
        case = dict(json.loads(a.replay), id=0)
        with tempfile.TemporaryDirectory() as d:
            (Path(d) / "tmp").mkdir()
            template = make_template(Path(d))
            print(json.dumps(run_case(case, Path(d), template, snapshot(template)), indent=2))
        return 0
    last = [0.0]

    def progress(done, total):
        if time.monotonic() - last[0] > 30 or done == total:
            last[0] = time.monotonic()
            print(f"{done}/{total} cases", file=sys.stderr, flush=True)

    s = fuzz(a.cases, a.seed, a.workers, a.timeout, progress=progress)
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(s, indent=2, default=str) + "\n")
    brief = {k: s[k] for k in ("date", "machine", "python", "sqlite", "cases", "seconds", "crashes", "hangs",
                               "partial_writes", "multiline_errors", "temp_files_left", "outcomes",
                               "by_format", "crash_signatures")}
    print(json.dumps(brief, indent=2))
    return 0 if s["crashes"] == s["hangs"] == s["partial_writes"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
