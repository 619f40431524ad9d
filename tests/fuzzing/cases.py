"""What each fuzz case is: the formats and their real seed reports, the mutations of each
format, and the hypothesis strategies that draw cases (as JSON-able dicts)."""
from __future__ import annotations

import json
import lzma
import math
import sqlite3
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# format -> (file name suffix, seeds). "!raw" = the .xz seed decompressed; "!head:N" = the
# first N data rows of a real CSV / JSONL (smaller seeds, faster cases, same real content);
# "!v2" = a real version 1 CUPTI trace as the tracer writes it now (with its end record);
# "!old" = a real nsys export in the names of older nsys (EXPORT_META_DATA of 2023.1,
# TARGET_INFO_GPU without `id` of the .qdrep era, versioned table names).
FORMATS: dict[str, tuple[str, list[str]]] = {
    "nsys-sqlite": (".nsys.sqlite", [
        "tests/data/rmsnorm-cupti/rmsnorm-nsys.nsys.sqlite",
        "profiles/cuda-vs-triton-h200/cuda-vs-triton-h200.nsys.sqlite",
        "profiles/rmsnorm-eager-vs-triton-h200/rmsnorm-eager-vs-triton-h200.nsys.sqlite",
        "profiles/known/known.nsys.sqlite",
        "tests/data/field-h100/ws.nsys.sqlite!old",
        "tests/data/field-h100/memcpy_only.nsys.sqlite"]),  # no kernel ran: the one line saying why
    "nsys-rep": (".nsys-rep", ["tests/data/known/known.nsys-rep"]),
    # the .qdrep container is the .nsys-rep one (same header); no .qdrep of our own can be made
    # (nsys writes .nsys-rep since 2021.4), and the public one is not ours to commit
    "nsys-qdrep": (".qdrep", ["tests/data/known/known.nsys-rep"]),
    "ncu-rep": (".ncu-rep", [
        "tests/data/known/rmsnorm-llama8b-t32768.ncu-rep.xz!raw"]),
    "ncu-rep-xz": (".ncu-rep.xz", [
        "tests/data/known/rmsnorm-llama8b-t32768.ncu-rep.xz",
        "profiles/cuda-vs-triton-h200/cuda-vs-triton-h200.ncu-rep.xz"]),
    "ncu-csv": (".raw.csv", [
        "tests/data/known/full_rmsnorm_triton.raw.csv",
        "tests/data/known/full_gemm_cublas_bf16_4096.raw.csv",
        "tests/data/known/known_lean.raw.csv!head:12"]),
    "cupti-trace": (".cupti.jsonl", [
        "tests/data/rmsnorm-cupti/rmsnorm-cupti.cupti.jsonl",
        "tests/data/known/known.cupti.jsonl!head:1200",
        "tests/data/rmsnorm-cupti/rmsnorm-cupti.cupti.jsonl!v2"]),
    "ncu-csv-details": (".details.csv", [
        "tests/data/field-h100/ws_metrics_stdout.csv",  # ncu --csv --metrics, the program's output in front
        "tests/data/ncu-pages/pages_stdout.details.csv",
        "tests/data/field-h100/ws_rules.details.csv",  # rule result rows
        "tests/data/known/details_page.csv"]),
    "kineto-trace": (".pt.trace.json.gz", [
        "tests/data/field-h100/ws.kineto.json",  # (plain JSON under a .gz name: read by its bytes)
        "tests/data/field-h100/ws2.kineto.json.gz",
        "tests/data/kineto-hta/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz",
        "tests/data/kineto-hta/trace_file_list/inference_rank_1.json.gz"]),
}
# the database each case starts from: one run with a timeline and linked ncu counters
BASE_FILES = ["profiles/cuda-vs-triton-h200/cuda-vs-triton-h200.nsys.sqlite",
              "profiles/cuda-vs-triton-h200/cuda-vs-triton-h200.ncu-rep.xz"]
BASE_RUN = "base"

BYTE_MUTATIONS = ["truncate", "truncate_boundary", "bitflip", "insert", "delete", "huge_insert", "empty",
                  "wrong_format"]
# cuts of the seed: a load of one must be whole, refused, or carry the parser's caveat (never a
# silent partial load)
TRUNCATIONS = {"truncate", "truncate_boundary"}
TEXT_MUTATIONS = ["encoding"]
SQLITE_MUTATIONS = ["drop_table", "rename_table", "drop_column", "rename_column", "set_value", "delete_rows",
                    "duplicate_rows", "utf16_db", "hostile_schema", "meaning"]
# changes a valid export may hold that mean something odd: a range never closed, ranges that
# overlap without nesting, a kernel ending before it starts, names as BLOBs, a second process
MEANINGS = ["unclosed_range", "overlapping_range", "backwards_kernel", "blob_names", "second_process"]
# exports built to make reading cost anything or yield rows the file does not hold
HOSTILE = ["view_selfjoin", "view_plain", "virtual_table", "generated_column", "trigger", "wal_mode", "huge_row",
           "many_columns", "join_bomb"]
CSV_MUTATIONS = ["drop_units_row", "extra_columns", "drop_column", "set_cell", "enormous_row", "ragged_row",
                 "header_only", "duplicate_header", "line_noise"]
JSONL_MUTATIONS = ["bad_line", "drop_meta", "field_type", "drop_field", "add_markers", "shuffle_lines"]
JSON_MUTATIONS = ["event_field", "drop_key", "shuffle_events", "nest_events"]  # one JSON document (Kineto)
# the file replaced or rewritten while ingest reads it (an exporter re-run, a sync tool): at
# which stage, how, and by what (another seed of its format, or its own bytes changed)
REPLACE_STAGES = ["after_detect", "after_parse", "at_write"]
REPLACE_HOWS = ["rename", "rewrite", "rewrite_same_size", "append"]
# a credential in a command line, an environment or another field the report records: it must
# appear in no table and no message (mutators.SECRET_SHAPES, SECRET_PLACES)
SECRET_FORMATS = ("nsys-sqlite", "cupti-trace", "kineto-trace")
SECRET_PLACES = {"nsys-sqlite": ["command", "arguments", "environment", "working_dir", "other_row", "export_meta"],
                 "cupti-trace": ["argv", "argv_one_string", "env"],
                 "kineto-trace": ["distributed_info"]}
N_SECRET_SHAPES = 16


def mutations_of(fmt: str) -> list[str]:
    out = list(BYTE_MUTATIONS)
    if fmt == "nsys-sqlite":
        out += SQLITE_MUTATIONS
    if fmt in ("ncu-csv", "ncu-csv-details", "cupti-trace"):
        out += TEXT_MUTATIONS
    if fmt in ("ncu-csv", "ncu-csv-details"):
        out += CSV_MUTATIONS
    if fmt == "kineto-trace":
        out += JSON_MUTATIONS
    if fmt == "cupti-trace":
        out += JSONL_MUTATIONS
    if fmt == "ncu-rep-xz":
        out += ["raw_then_xz"]  # mutate the report inside, then compress: a valid xz stream of bad bytes
    out.append("replaced_mid_load")
    if fmt in SECRET_FORMATS:
        out.append("secret")
    return out


# share of the cases each format gets (ncu-rep goes through NVIDIA's native reader: slowest)
# nvprof: no public report licensed to commit; its seed is built in nvprof's layout from real records
FORMATS["nvprof"] = (".nvvp", ["tests/data/rmsnorm-cupti/rmsnorm-cupti.cupti.jsonl!nvvp",
                               "tests/data/known/known.cupti.jsonl!nvvp"])
WEIGHTS = {"nsys-sqlite": 0.22, "nvprof": 0.04, "nsys-rep": 0.02, "nsys-qdrep": 0.02, "ncu-rep": 0.10,
           "ncu-rep-xz": 0.08, "ncu-csv": 0.14, "ncu-csv-details": 0.12, "cupti-trace": 0.14, "kineto-trace": 0.16}
NEW_FORMAT_WEIGHT = 0.1  # a parser the tables above do not know yet


def _discover_formats(roots=None) -> None:
    """Every parser in the registry is fuzzed: a format the tables above do not name gets the
    byte mutations, with every real report under tests/data/ and profiles/ that the registry
    detects as that format as its seeds."""
    from profkit import parsers
    from profkit.core.errors import ProfkitError

    missing = [f for f in parsers.formats() if f not in FORMATS]
    if not missing:
        return
    found: dict[str, list[str]] = {f: [] for f in missing}
    for folder in roots or (ROOT / "tests" / "data", ROOT / "profiles"):
        for p in sorted(folder.rglob("*")):
            if p.is_file() and p.stat().st_size < 64 << 20:
                try:
                    fmt = parsers.detect(p).FORMAT
                except (ProfkitError, OSError):
                    continue
                if fmt in found:
                    found[fmt].append(str(p.relative_to(ROOT)) if p.is_relative_to(ROOT) else str(p))
    for fmt, seeds in found.items():
        if seeds:
            suffix = max(parsers.by_format(fmt).SUFFIXES, key=len)
            FORMATS[fmt] = (suffix, seeds[:4])
            WEIGHTS[fmt] = NEW_FORMAT_WEIGHT


_discover_formats()

# nasty values, by tag (JSON-able case descriptions; the worker turns tags into values)
SQL_VALUES = ["null", "empty", "huge_text", "max_int", "min_int", "zero", "negative", "float", "inf", "nan",
              "text", "blob", "bad_utf8", "latin1", "huge_blob"]
CSV_VALUES = ["1e999", "-1e999", "99999999999999999999999999999", "-99999999999999999999999999999", "nan", "NaN",
              "inf", "-inf", "", "n/a", "1,2,3", "--", "0x1F", "1e-400", "١٢٣", "9" * 400, "HUGE_FIELD", '"', "\x00"]
JSON_VALUES = ["null", "empty", "huge_text", "int70", "neg_int70", "int63", "negative", "float", "true", "list0",
               "list1", "list4", "dict", "nan", "inf", "str_num", "nested", "surrogate", "unicode"]
SQLITE_TABLES = ["StringIds", "CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS",
                 "TARGET_INFO_GPU", "META_DATA_EXPORT", "META_DATA_CAPTURE",
                 # read to say why an export holds no kernel, and for its GPU
                 "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"]
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
    elif how == "v2":
        import tempfile

        from profkit.capture.cupti_tracer import write_trace

        recs = [json.loads(x) for x in data.splitlines()]
        with tempfile.TemporaryDirectory() as d:
            write_trace(f"{d}/t", recs[0], recs[1:])
            data = Path(f"{d}/t").read_bytes()
    elif how == "old":
        import tempfile

        with tempfile.TemporaryDirectory() as d:
            f = Path(d) / "old.sqlite"
            f.write_bytes(data)
            c = sqlite3.connect(f)
            c.execute("ALTER TABLE META_DATA_EXPORT RENAME TO EXPORT_META_DATA")
            c.execute("ALTER TABLE TARGET_INFO_GPU DROP COLUMN id")
            c.execute("ALTER TABLE CUPTI_ACTIVITY_KIND_RUNTIME RENAME TO CUPTI_ACTIVITY_KIND_RUNTIME_V2")
            c.commit()
            c.execute("VACUUM")
            c.close()
            data = f.read_bytes()
    elif how == "nvvp":  # an nvprof report built from a CUPTI trace's records (tests/nvprof_layout.py)
        import tempfile

        from nvprof_layout import build_nvvp

        with tempfile.TemporaryDirectory() as d:
            data = build_nvvp(Path(d) / "x.nvvp", ROOT / path).read_bytes()
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
        c = sqlite3.connect(f"{(ROOT / spec.partition('!')[0]).as_uri()}?mode=ro", uri=True)
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
        "truncate_boundary": st.fixed_dictionaries({"frac": frac}),
        "hostile_schema": st.fixed_dictionaries({"kind": st.sampled_from(HOSTILE), "table": st.sampled_from(SQLITE_TABLES),
                                                 "rng": rng}),
        "raw_then_xz": st.fixed_dictionaries({"inner": st.sampled_from(["truncate", "truncate_boundary", "bitflip",
                                                                        "insert", "delete"]),
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
        "meaning": st.fixed_dictionaries({"kind": st.sampled_from(MEANINGS), "rng": rng}),
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
        # one JSON document (Kineto)
        "event_field": st.fixed_dictionaries({"field": st.sampled_from(["ts", "dur", "name", "cat", "ph", "args", "pid",
                                                                        "tid", "args.correlation", "args.grid",
                                                                        "args.device", "args.stream"]),
                                              "value": st.sampled_from(JSON_VALUES), "which": frac}),
        "drop_key": st.fixed_dictionaries({"key": st.sampled_from(["traceEvents", "deviceProperties", "distributedInfo",
                                                                   "schemaVersion", "event:ts", "event:dur",
                                                                   "event:args"]), "which": frac}),
        "shuffle_events": st.fixed_dictionaries({"rng": rng, "dup": st.booleans()}),
        "nest_events": st.fixed_dictionaries({"n": st.integers(1, 200), "rng": rng}),
        "replaced_mid_load": st.fixed_dictionaries({"stage": st.sampled_from(REPLACE_STAGES),
                                                    "how": st.sampled_from(REPLACE_HOWS),
                                                    "by": st.sampled_from([x for x in seeds] + ["self"]),
                                                    "rng": rng}),
        "secret": st.fixed_dictionaries({"shape": st.integers(0, N_SECRET_SHAPES - 1),
                                         "place": st.sampled_from(SECRET_PLACES.get(fmt, ["none"])), "rng": rng}),
    }[mutation]
    if mutation == "drop_column" and fmt in ("ncu-csv", "ncu-csv-details"):
        p = st.fixed_dictionaries({"col": frac})
    case = {"format": st.just(fmt), "mutation": st.just(mutation), "seed": st.sampled_from(seeds), "p": p,
            "into_existing_run": st.booleans()}
    if fmt == "nsys-sqlite":  # half the exports through the column path (real ones take it from 200,000 rows)
        case["column_path"] = st.booleans()
    return st.fixed_dictionaries(case)


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
