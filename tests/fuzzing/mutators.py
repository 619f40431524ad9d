"""Turning a case into a file: the mutations of bytes, SQLite exports, CSV and JSONL (worker side)."""
from __future__ import annotations

import gzip
import io
import json
import lzma
import random
import sqlite3
import struct
from pathlib import Path

from .cases import CSV_MUTATIONS, FORMATS, JSON_MUTATIONS, JSONL_MUTATIONS, SQLITE_MUTATIONS, SQLITE_TABLES, seed_bytes

XZ_MAGIC, GZ_MAGIC = b"\xfd7zXZ\x00", b"\x1f\x8b"


def boundaries(data: bytes, fmt: str) -> list[int]:
    """Where a file of this format can end early on its own framing: after a whole .ncu-rep
    block, a whole SQLite page, a whole line (CSV, JSON lines), a whole JSON object. A cut there
    leaves whole records: the hardest cut to see."""
    if data.startswith(b"NVR\x00"):
        out, off = [], 4
        while off + 4 <= len(data):
            off += 4 + struct.unpack_from("<I", data, off)[0]
            out.append(off)
        return [x for x in out if x < len(data)]
    if data.startswith(b"SQLite format 3\x00") and len(data) >= 100:
        page = struct.unpack(">H", data[16:18])[0]
        page = 65536 if page == 1 else page
        return list(range(page, len(data), page))
    stripped = data.lstrip()
    if stripped[:1] in (b"{", b"[") and "cupti" not in fmt and b"\n{" not in data[:4096]:
        return [i + 1 for i in range(len(data) - 1) if data[i] == 0x7D]  # after each '}' of one JSON document
    return [i + 1 for i in range(len(data) - 1) if data[i] == 0x0A]


def _cut_at_boundary(data: bytes, fmt: str, frac: float) -> bytes:
    """A cut at a framing boundary, inside a compressed file's content for .xz and .gz (the
    compressed stream stays valid: only the content's framing can tell)."""
    if data.startswith(XZ_MAGIC):
        return lzma.compress(_cut_at_boundary(lzma.decompress(data), fmt, frac), preset=0)
    if data.startswith(GZ_MAGIC):
        return gzip.compress(_cut_at_boundary(gzip.decompress(data), fmt, frac), mtime=0)
    b = boundaries(data, fmt)
    if not b:
        return data[: int(frac * len(data))]
    return data[: b[min(int(frac * len(b)), len(b) - 1)]]


def _hostile(c: sqlite3.Connection, path: Path, kind: str, t: str, rng: random.Random) -> None:
    """Make table t (of an nsys export) hostile: see cases.HOSTILE."""
    t = _actual(c, t)
    if not _exists(c, t):  # (an export without that table: another one the parser reads)
        t = next((x for x in ("CUPTI_ACTIVITY_KIND_KERNEL", *SQLITE_TABLES) if _exists(c, _actual(c, x))), t)
        t = _actual(c, t)
    cols = [r[1] for r in c.execute(f'PRAGMA table_info("{t}")')]
    q = ", ".join(f'"{x}"' for x in cols)
    if kind in ("view_selfjoin", "view_plain", "virtual_table"):
        c.execute(f'ALTER TABLE "{t}" RENAME TO "{t}_base"')
        if kind == "view_selfjoin":  # 2 or 3 copies of the table per row of the view
            join = ", ".join(f'"{t}_base" j{i}' for i in range(2 if t == "StringIds" else 3))
            c.execute(f'CREATE VIEW "{t}" AS SELECT j0.* FROM {join}')
        elif kind == "view_plain":
            c.execute(f'CREATE VIEW "{t}" AS SELECT * FROM "{t}_base"')
        else:
            c.execute(f'CREATE VIRTUAL TABLE "{t}" USING fts4({q})')
            c.execute(f'INSERT INTO "{t}" SELECT {q} FROM "{t}_base"')
    elif kind == "generated_column":
        c.execute(f'ALTER TABLE "{t}" ADD COLUMN "extra_{rng.randrange(100)}" TEXT AS (printf(\'%.1000c\', \'x\'))')
    elif kind == "trigger":
        c.execute("CREATE TABLE IF NOT EXISTS trigger_log (x)")
        c.execute(f'CREATE TRIGGER "t_{rng.randrange(100)}" AFTER INSERT ON "{t}" BEGIN INSERT INTO trigger_log VALUES (1); END')
    elif kind == "huge_row":
        _rebuild_loose(c, t)
        text = [x for x in cols if x.lower() in ("value", "demangledname", "shortname", "text", "name")] or cols[-1:]
        c.execute(f'UPDATE "{t}" SET "{text[0]}" = ? WHERE rowid = (SELECT min(rowid) FROM "{t}")', ("x" * (24 << 20),))
    elif kind == "many_columns":
        _rebuild_loose(c, t)
        for i in range(400):
            c.execute(f'ALTER TABLE "{t}" ADD COLUMN "pad{i}" TEXT')
    elif kind == "join_bomb":  # kernels and launch calls of one correlation id and process
        k, r = "CUPTI_ACTIVITY_KIND_KERNEL", _actual(c, "CUPTI_ACTIVITY_KIND_RUNTIME")
        if _exists(c, k) and _exists(c, r):
            c.execute(f'CREATE TABLE k1 AS SELECT * FROM "{k}" LIMIT 1')
            c.execute(f'CREATE TABLE r1 AS SELECT * FROM "{r}" WHERE correlationId = (SELECT correlationId FROM k1) LIMIT 1')
            n = 2000 + rng.randrange(2000)
            for table, one in ((k, "k1"), (r, "r1")):
                c.execute(f'DELETE FROM "{table}"')
                c.execute(f"WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {n}) "
                          f'INSERT INTO "{table}" SELECT {one}.* FROM {one}, n')
            c.execute("DROP TABLE k1")
            c.execute("DROP TABLE r1")

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


_OLDER = {"META_DATA_EXPORT": ["EXPORT_META_DATA"]}  # the names of older nsys (cases.seed_bytes '!old')


def _actual(c, t: str | None) -> str | None:
    """The table as this export names it: t, a versioned t (t_V2...), or its older name."""
    if t is None or _exists(c, t):
        return t
    for alt in [f"{t}_V{i}" for i in range(2, 10)] + _OLDER.get(t, []):
        if _exists(c, alt):
            return alt
    return t


def _meaning(c: sqlite3.Connection, kind: str, rng: random.Random) -> None:
    """A valid export changed to mean something odd (cases.MEANINGS), on rows picked by rng."""
    kt, nt = _actual(c, "CUPTI_ACTIVITY_KIND_KERNEL"), _actual(c, "NVTX_EVENTS")

    def pick(t: str, where: str = "1") -> int | None:
        rows = [r[0] for r in c.execute(f'SELECT rowid FROM "{t}" WHERE {where} ORDER BY rowid')]
        return rows[rng.randrange(len(rows))] if rows else None

    if kind in ("unclosed_range", "overlapping_range") and _exists(c, nt):
        r = pick(nt, '"end" IS NOT NULL')
        if r is not None and kind == "unclosed_range":
            c.execute(f'UPDATE "{nt}" SET "end" = NULL WHERE rowid = ?', (r,))
        elif r is not None:  # outlives its parent by a tenth of the capture
            span = c.execute(f'SELECT max("end") - min(start) FROM "{nt}"').fetchone()[0] or 0
            c.execute(f'UPDATE "{nt}" SET "end" = "end" + ? WHERE rowid = ?', (span // 10 + 1, r))
    elif kind == "backwards_kernel" and _exists(c, kt):
        r = pick(kt)
        if r is not None:
            c.execute(f'UPDATE "{kt}" SET "end" = start - 1 - ? WHERE rowid = ?', (rng.randrange(1000), r))
    elif kind == "blob_names" and _exists(c, "StringIds"):
        c.execute("UPDATE StringIds SET value = CAST(value AS BLOB) WHERE id % ? = 0", (rng.randrange(1, 5),))
    elif kind == "second_process" and _exists(c, kt):
        cols = {r[1] for r in c.execute(f'PRAGMA table_info("{kt}")')}
        if "globalPid" in cols:  # every other kernel from another process on the host
            c.execute(f'UPDATE "{kt}" SET globalPid = globalPid + 16777216 WHERE rowid % 2 = 0')


def mutate_sqlite(path: Path, mutation: str, p: dict) -> None:
    rng = random.Random(p.get("rng", 0))
    if mutation == "hostile_schema":
        c = sqlite3.connect(path)
        c.execute("PRAGMA journal_mode = DELETE")
        if p["kind"] != "wal_mode":
            _hostile(c, path, p["kind"], p["table"], rng)
        c.commit()
        if p["kind"] == "wal_mode":  # at rest in WAL mode, no -wal beside it: reading must leave none
            c.execute("PRAGMA journal_mode = WAL")
        c.close()
        return
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
    if mutation == "meaning":
        c = sqlite3.connect(path)
        c.execute("PRAGMA journal_mode = DELETE")
        _meaning(c, p["kind"], rng)
        c.commit()
        c.close()
        return
    c = sqlite3.connect(path)
    c.execute("PRAGMA journal_mode = DELETE")
    if mutation in ("drop_column", "rename_column", "set_value"):
        t, col = p["col"]
    else:
        t, col = p.get("table"), None
    t = _actual(c, t)
    if not _exists(c, t):
        c.close()
        return
    if col is not None:
        have = [r[1] for r in c.execute(f'PRAGMA table_info("{t}")')]
        if col not in have:  # a column this seed lacks (an older export): another of the table
            col = have[sum(map(ord, col)) % len(have)]
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


def mutate_json(data: bytes, mutation: str, p: dict) -> bytes:
    """Mutations of one JSON document (a Kineto trace), kept gzip'd if it was."""
    gz = data.startswith(GZ_MAGIC)
    doc = json.loads(gzip.decompress(data) if gz else data)
    rng = random.Random(p.get("rng", 0))
    events = doc.get("traceEvents") if isinstance(doc, dict) else None
    if not isinstance(events, list) or not events:
        raise ValueError("no traceEvents to mutate")
    pick = events[min(int(p.get("which", 0) * len(events)), len(events) - 1)]
    if mutation == "event_field" and isinstance(pick, dict):
        field = p["field"]
        if field.startswith("args."):
            args = pick.setdefault("args", {})
            if isinstance(args, dict):
                args[field[5:]] = _json_value(p["value"])
        else:
            pick[field] = _json_value(p["value"])
    elif mutation == "drop_key":
        key = p["key"]
        if key.startswith("event:") and isinstance(pick, dict):
            pick.pop(key[6:], None)
        else:
            doc.pop(key, None)
    elif mutation == "shuffle_events":
        rng.shuffle(events)
        if p["dup"]:
            events += events[: len(events) // 3]
    elif mutation == "nest_events":  # ranges that overlap and nest oddly, on the kernels' threads
        for k in range(p["n"]):
            e = dict(rng.choice(events)) if isinstance(events[0], dict) else {}
            e.update(cat="user_annotation", ph="X", name=f"r{k}", dur=rng.choice([0, 1, 10**6, -5, 10**15]))
            events.append(e)
    out = json.dumps(doc).encode()
    return gzip.compress(out, mtime=0) if gz else out


def _bytes_mutation(data: bytes, mutation: str, p: dict, fmt: str = "") -> bytes:
    rng = random.Random(p.get("rng", 0))
    n = len(data)
    at = min(int(p.get("frac", 0) * n), n)
    if mutation == "truncate":
        return data[:at]
    if mutation == "truncate_boundary":
        return _cut_at_boundary(data, fmt, p["frac"])
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


# --- secrets: a credential where a report records a command line or an environment ---------------

_ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"


def _secret_core(p: dict) -> str:
    """The random part of a case's secret: what must appear in no output (24 characters)."""
    rng = random.Random(p.get("rng", 0))
    return "Zq" + "".join(rng.choice(_ALNUM) for _ in range(22))


def secret_of(p: dict) -> tuple[str, list[str], tuple[str, str]]:
    """(the secret's random part, a command line holding it, an environment entry holding it)
    of shape p["shape"] (cases.N_SECRET_SHAPES): the shapes of issue 51's item 4."""
    v = _secret_core(p)
    shape = p["shape"]
    line = {
        0: ["python", "train.py", "--hf-token", v],
        1: ["python", "train.py", f"--api-key={v}"],
        2: ["python", "train.py", "--hftoken", v],
        3: ["python", "train.py", "--wandb-key", v],
        4: ["mysql", "-u", "root", f"-p{v}"],
        5: ["git", "clone", f"https://user:{v}@example.com/org/repo.git"],
        6: ["curl", "-H", f"Authorization: Bearer {v}", "https://example.com"],
        7: ["env", f"WANDB_API_KEY={v}", "python", "train.py"],
        8: ["docker", "run", "-e", f"HF_TOKEN={v}", "image"],
        9: ["bash", "-c", f"HF_TOKEN={v} python train.py"],
        10: ["python", "train.py", "--model", f"hf_{v}{v[:10]}"],
        11: ["python", "train.py", f"github_pat_{v}{v}"],
        12: ["python", "train.py", f"glpat-{v}"],
        13: ["python", "train.py", f"AIza{v}{v[:12]}"],
        14: ["python", "train.py", "--password", v],
        15: ["python", "train.py", f"--db=postgres://admin:{v}@db.example.com/x"],
    }[shape]
    env = {7: ("WANDB_API_KEY", v), 8: ("HF_TOKEN", v), 9: ("HF_TOKEN", v), 15: ("TORCH_VERSION", f"https://u:{v}@h/x"),
           10: ("HF_HOME_TOKENLESS", f"hf_{v}{v[:10]}"), 5: ("PIP_INDEX_URL", f"https://user:{v}@pypi.example.com")
           }.get(shape, ("MY_SECRET_KEY", v))
    return v, line, env


def plant_secret(path: Path, fmt: str, p: dict) -> None:
    """Put the case's secret where the report records a command or environment (p["place"])."""
    _, line, (name, value) = secret_of(p)
    place = p["place"]
    if fmt == "nsys-sqlite":
        c = sqlite3.connect(path)
        c.execute("PRAGMA journal_mode = DELETE")
        t = _actual(c, "META_DATA_CAPTURE")
        if place == "export_meta":
            t = _actual(c, "META_DATA_EXPORT")
        if not _exists(c, t):
            c.execute(f'CREATE TABLE "{t}" (name TEXT, value TEXT)')
        rows: list[tuple[str, str]] = {
            "command": [("PROCESS_0:COMMAND", " ".join(line))],
            "arguments": [(f"PROCESS_0:ARGUMENT_{i}", a) for i, a in enumerate(line)],
            "environment": [("PROCESS_0:ENVIRONMENT_VARIABLE", f'{name}="{value}"'),
                            ("PROCESS_0:ENVIRONMENT_VARIABLE", f"{name}={value}"),
                            ("PROCESS_0:ENVIRONMENT_VARIABLE", value)],  # an entry without `=`
            "working_dir": [("PROCESS_0:WORKING_DIR", " ".join(line))],
            "other_row": [("PROCESS_0:LAUNCH_COMMAND_LINE", " ".join(line))],
            "export_meta": [("EXPORT_COMMAND_LINE", " ".join(line))],
        }[place]
        if place in ("command", "working_dir"):
            c.execute(f'DELETE FROM "{t}" WHERE name = ?', (rows[0][0],))
        c.executemany(f'INSERT INTO "{t}" (name, value) VALUES (?, ?)', rows)
        c.commit()
        c.close()
        return
    data = path.read_bytes()
    if fmt == "cupti-trace":
        lines = data.decode("utf-8").splitlines()
        meta = json.loads(lines[0])
        if place == "argv":
            meta["argv"] = line
        elif place == "argv_one_string":
            meta["argv"] = [" ".join(line)]
        else:
            meta["env"] = {name: value, "CMD": " ".join(line)}
        lines[0] = json.dumps(meta)
        path.write_text("\n".join(lines) + "\n")
        return
    if fmt == "kineto-trace":
        gz = data.startswith(GZ_MAGIC)
        doc = json.loads(gzip.decompress(data) if gz else data)
        info = doc.get("distributedInfo") if isinstance(doc.get("distributedInfo"), dict) else {}
        info.update(backend=" ".join(line), init_method=f"env://{name}={value}")
        doc["distributedInfo"] = info
        out = json.dumps(doc).encode()
        path.write_bytes(gzip.compress(out, mtime=0) if gz else out)
        return
    raise ValueError(f"no place for a secret in {fmt}")


def replacement(case: dict, original: bytes) -> bytes:
    """What replaces a file mid-load: another seed of its format, or its own bytes with a
    stretch of its middle reversed (the same size: only the content tells)."""
    by = case["p"]["by"]
    if by != "self" and by != case["seed"]:
        return seed_bytes(by)
    n = len(original)
    i = n // 2
    return original[:i] + original[i : i + 256][::-1] + original[i + 256 :] if n > 8 else original + b"x"


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
        raw = _bytes_mutation(lzma.decompress(data), p["inner"], inner, fmt)
        data = lzma.compress(raw, preset=0)
    elif mut == "encoding":
        data = _reencode(data.decode("utf-8"), p["enc"], random.Random(p["rng"]))
    elif mut in CSV_MUTATIONS and fmt in ("ncu-csv", "ncu-csv-details"):
        data = mutate_csv(data, mut, p)
    elif mut in JSON_MUTATIONS:
        data = mutate_json(data, mut, p)
    elif mut in JSONL_MUTATIONS:
        data = mutate_jsonl(data, mut, p)
    elif mut in SQLITE_MUTATIONS:
        path.write_bytes(data)
        mutate_sqlite(path, mut, p)
        return path
    elif mut == "secret":
        path.write_bytes(data)
        plant_secret(path, fmt, p)
        return path
    elif mut == "replaced_mid_load":
        pass  # the seed whole: the worker replaces it while ingest reads it (pool.run_case)
    else:
        data = _bytes_mutation(data, mut, p, fmt)
    path.write_bytes(data)
    return path
