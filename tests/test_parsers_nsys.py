"""nsys SQLite export from a real H200 capture of profkit.kernels.known (profiles/known).

Expected values were cross-checked with a plain SQL containment join over the export
(runtime call of each kernel inside each push/pop range on the same thread)."""
import sqlite3
from pathlib import Path

import pytest
from profdata import KNOWN_NSYS, KNOWN_NSYS_REP
from profkit.parsers import nsys_rep, nsys_sqlite

from profkit.core.errors import BadInput, ToolMissing
from profkit.core.rows import KERNEL_FIELDS

F = {f: i for i, f in enumerate(KERNEL_FIELDS)}


@pytest.fixture(scope="module")
def rep():
    return nsys_sqlite.parse(KNOWN_NSYS)


def per_path(rep):
    out = {}
    for k in rep.kernels:
        n, t = out.get(k[F["nvtx_path"]], (0, 0))
        out[k[F["nvtx_path"]]] = (n + 1, t + k[F["duration_ns"]])
    return out


def test_kernel_count_and_time_per_range(rep):
    assert len(rep.kernels) == 166
    p = per_path(rep)
    assert p["known/rmsnorm_eager"] == (24, 2595606)
    assert p["known/rmsnorm_triton"] == (3, 229343)
    assert p["known/gemm_window/gemm_cublas/bf16_4096"] == (3, 517278)
    assert p["known/tiny_launches/burst"] == (100, 94784)
    assert p["known/occupancy_limited"] == (3, 3107604)
    assert p[None][0] == 33  # warm-up launches run before any range opens


def test_nested_path_domains_and_start_end(rep):
    burst = [k for k in rep.kernels if k[F["nvtx_range"]] == "burst"]
    assert {k[F["nvtx_path"]] for k in burst} == {"known/tiny_launches/burst"}
    domains = {(r[0], r[1], r[2]) for r in rep.ranges}
    assert ("profkit", "burst", "push_pop") in domains       # push/pop in a named domain, registered string
    assert ("profkit", "gemm_window", "start_end") in domains  # start/end range
    depth = {r[1]: (r[7], r[8]) for r in rep.ranges}
    assert depth["bf16_4096"] == (2, "known/gemm_cublas/bf16_4096")


def test_kernel_fields_and_launch_call(rep):
    occ = next(k for k in rep.kernels if k[F["short_name"]] == "occupancy_limited_copy" and k[F["nvtx_range"]])
    assert (occ[F["block_x"]], occ[F["grid_x"]], occ[F["shared_mem_dynamic"]]) == (64, 528, 204800)
    assert occ[F["api_name"]] == "cuLaunchKernel"
    tri = next(k for k in rep.kernels if k[F["short_name"]] == "_rmsnorm_fwd")
    assert tri[F["grid_x"]] == 16384 and tri[F["api_start_ns"]] < tri[F["start_ns"]]


def test_gpu_facts(rep):
    assert rep.facts["gpu_name"] == "NVIDIA H200"
    assert rep.facts["sm_count"] == 132
    assert rep.facts["gpu_uuid"].startswith("9c8a04ee")


def test_versioned_table_names(copy):
    """Newer exports suffix table names (_V2): found by prefix."""
    f = copy(KNOWN_NSYS, "v2.sqlite")
    with sqlite3.connect(f) as c:
        c.execute("ALTER TABLE NVTX_EVENTS RENAME TO NVTX_EVENTS_V2")
        c.execute("ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL RENAME TO CUPTI_ACTIVITY_KIND_KERNEL_V3")
    r = nsys_sqlite.parse(f)
    assert per_path(r)["known/tiny_launches/burst"] == (100, 94784)


def test_missing_kernel_table(copy):
    f = copy(KNOWN_NSYS, "nokern.sqlite")
    with sqlite3.connect(f) as c:
        c.execute("DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL")
    with pytest.raises(BadInput, match="CUPTI_ACTIVITY_KIND_KERNEL"):
        nsys_sqlite.parse(f)


def test_nsys_rep_without_nsys(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("NSYS", raising=False)
    assert nsys_rep.sniff(KNOWN_NSYS_REP, b"")
    with pytest.raises(ToolMissing, match="nsys"):
        nsys_rep.parse(KNOWN_NSYS_REP)


def _exports():
    from profdata import ROOT

    found = sorted((ROOT / "profiles").glob("*/*.nsys.sqlite")) + sorted((ROOT / "tests" / "data").glob("*/*.sqlite"))
    field = Path("/work/shared/field-reports")
    return found + (sorted(field.glob("*/*.sqlite")) if field.is_dir() else [])


def _both_paths(export, monkeypatch):
    """(column path's (kernels, ranges, facts) or refusal, the row path's)."""
    monkeypatch.setattr(nsys_sqlite, "BULK_MIN_ROWS", 0)
    got = []
    for split in (10**18, 0):
        monkeypatch.setattr(nsys_sqlite, "_SPLIT_ROWS", split)
        try:
            a = nsys_sqlite.parse(export)
            assert a.bulk is not None
            got.append((list(a.kernels), list(a.ranges), a.facts))
        except BadInput as e:
            got.append(str(e))
    assert got[0] == got[1], "the NVTX ranges read in two halves differ from one read"
    got = got[0]
    monkeypatch.setattr(nsys_sqlite, "BULK_MIN_ROWS", 10**18)
    try:
        b = nsys_sqlite.parse(export)
        want = (list(b.kernels), list(b.ranges), b.facts)
    except BadInput as e:
        want = str(e)
    return got, want



@pytest.mark.parametrize("export", _exports(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_column_path_gives_the_row_path_rows(export, monkeypatch):
    """Large exports take the column path (numpy projection, rows copied by SQL): on every real
    export here it yields exactly the row path's kernels, ranges (paths as exact names) and facts,
    its NVTX ranges read whole or in two halves by two threads (past _SPLIT_ROWS rowids)."""
    got, want = _both_paths(export, monkeypatch)
    assert got == want
    if not isinstance(got, str):
        at = KERNEL_FIELDS.index("nvtx_path")
        assert [k[at].names if k[at] is not None else None for k in got[0]] == \
               [k[at].names if k[at] is not None else None for k in want[0]]


@pytest.mark.parametrize("change", [
    "K demangledName = NULL WHERE r % 5 = 0",  # no name
    "K demangledName = 999999999 WHERE r % 6 = 0",  # a key StringIds lacks
    "K shortName = 'text ' || r WHERE r % 7 = 0",  # a name as text, not a key
    "K correlationId = NULL WHERE r % 5 = 0",  # kernels no call can launch
    "K correlationId = 'c' || correlationId WHERE r % 9 = 0",  # join keys as text: the join in SQLite
    # process ids below zero: SQLite's division truncates, numpy's floors
    "R globalTid = -globalTid; K globalPid = -globalPid",
])
def test_odd_keys_give_the_row_paths_names_and_calls(copy, monkeypatch, change):
    """The column path finds the distinct name keys in its kernel read (every key an integer
    or NULL) or, where a key is neither, by the store's scan; it pairs kernels with their
    launch calls in numpy where every key is an integer or NULL, else in SQLite. Each gives
    the row path's names and calls."""
    p = copy(KNOWN_NSYS, "names.nsys.sqlite")
    c = sqlite3.connect(p)
    # (the tables again without their NOT NULL constraints, rows in the same rowid order)
    for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME"):
        c.execute(f"CREATE TABLE k AS SELECT rowid AS r, * FROM {t} ORDER BY rowid")
        c.execute(f"DROP TABLE {t}")
        c.execute(f"ALTER TABLE k RENAME TO {t}")
    for one in change.split("; "):
        table = {"K": "CUPTI_ACTIVITY_KIND_KERNEL", "R": "CUPTI_ACTIVITY_KIND_RUNTIME"}[one[0]]
        assert c.execute(f"UPDATE {table} SET {one[2:]}").rowcount
    c.commit()
    c.close()
    got, want = _both_paths(p, monkeypatch)
    assert got == want and not isinstance(got, str)
    api = KERNEL_FIELDS.index("api_name")
    assert sum(k[api] is not None for k in got[0]) > len(got[0]) // 2, "most kernels lost their launch call"


def test_a_clean_export_is_read_without_typeof_and_an_odd_one_with_it(copy, monkeypatch):
    """The column path reads the kernels', launch calls' and NVTX ranges' columns as they are,
    typed by ADBC (typeof() on each value cost a third to most of each read); a value of
    another type (a real number in the last batch: ADBC types each batch) sends that read to
    typeof()."""
    reads = []
    real, real_parts = nsys_sqlite.read_columns, nsys_sqlite.read_columns_in_parts

    def spy(path, sql, *a, **k):
        reads.append(("typeof" in sql, sql.split("FROM")[-1].split()[0].strip('"'), k.get("strict", False)))
        return real(path, sql, *a, **k)

    def spy_parts(path, parts, *a, **k):
        reads.extend(("typeof" in sql, sql.split("FROM")[-1].split()[0].strip('"'), k.get("strict", False))
                     for sql, _ in parts)
        return real_parts(path, parts, *a, **k)
    monkeypatch.setattr(nsys_sqlite, "read_columns", spy)
    monkeypatch.setattr(nsys_sqlite, "read_columns_in_parts", spy_parts)
    monkeypatch.setattr(nsys_sqlite, "BULK_MIN_ROWS", 0)
    nsys_sqlite.parse(KNOWN_NSYS).bulk.kernel_part()
    assert sorted(reads) == [(False, "CUPTI_ACTIVITY_KIND_KERNEL", True), (False, "CUPTI_ACTIVITY_KIND_RUNTIME", True),
                             (False, "NVTX_EVENTS", True)], reads
    for table, change in (("CUPTI_ACTIVITY_KIND_KERNEL", "deviceId = 0.5"), ("NVTX_EVENTS", "globalTid = 0.5")):
        p = copy(KNOWN_NSYS, "real.nsys.sqlite")
        c = sqlite3.connect(p)
        c.execute(f"UPDATE {table} SET {change} WHERE rowid = (SELECT max(rowid) FROM {table} WHERE eventType = 59)"
                  if table == "NVTX_EVENTS" else f"UPDATE {table} SET {change} WHERE rowid = (SELECT max(rowid) FROM {table})")
        c.commit()
        c.close()
        reads.clear()
        try:
            nsys_sqlite.parse(p).bulk.kernel_part()
        except BadInput:
            pass  # (a range whose thread is not an integer refuses the file: found by typeof())
        assert (True, table, False) in reads, reads


def test_sparse_rowids_size_no_read_by_their_span(copy, monkeypatch):
    """The column path sizes its kernel and NVTX reads by the tables' rowid spans (a count would
    read every page first); a file whose rowids leap (one kernel and one range moved to rowid
    2^40: a hand-made or hostile file) is counted instead, never read into columns of 2^40
    rows, and gives the row path's rows."""
    p = copy(KNOWN_NSYS, "sparse.nsys.sqlite")
    c = sqlite3.connect(p)
    for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "NVTX_EVENTS"):
        assert c.execute(f"UPDATE {t} SET rowid = {1 << 40} WHERE rowid = (SELECT max(rowid) FROM {t})").rowcount
    c.commit()
    c.close()
    sized = []
    real = nsys_sqlite.read_columns

    def spy(*a, **k):
        sized.append(k.get("n_rows"))
        return real(*a, **k)
    monkeypatch.setattr(nsys_sqlite, "read_columns", spy)
    got, want = _both_paths(p, monkeypatch)
    assert got == want and not isinstance(got, str)
    assert any(sized) and max(n or 0 for n in sized) <= p.stat().st_size, sized


def test_kernels_of_calls_under_other_names_still_find_their_call(copy, monkeypatch):
    """The column path joins the calls named as launches first and the other calls only for
    kernels left over: a real export whose launch call is renamed (a launch API the name
    list does not know) and with some calls deleted (kernels without one) gives the row
    path's rows, through that second join; an untouched export needs only the first."""
    joins = []
    for how in ("_calls", "_join"):  # (in numpy, in SQLite)
        real = getattr(nsys_sqlite._LaunchCalls, how)
        monkeypatch.setattr(nsys_sqlite._LaunchCalls, how,
                            lambda self, where, *a, how=how, real=real: joins.append(f"{how} {where}") or real(self, where, *a))
    got, want = _both_paths(KNOWN_NSYS, monkeypatch)
    assert got == want and len(joins) == 2 and all(j.startswith("_calls WHERE r.nameId IN (") for j in joins), joins
    p = copy(KNOWN_NSYS, "renamed.nsys.sqlite")
    c = sqlite3.connect(p)
    assert c.execute("UPDATE StringIds SET value = 'myLauncher' WHERE value LIKE 'cudaLaunchKernel%'").rowcount
    lone = c.execute("DELETE FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE correlationId IN "
                     "(SELECT correlationId FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY start LIMIT 5)").rowcount
    c.commit()
    c.close()
    assert lone == 5
    joins.clear()
    got, want = _both_paths(p, monkeypatch)
    assert got == want and len(joins) == 4 and joins[1].startswith("_join") and "NOT IN" in joins[1], joins
    api = KERNEL_FIELDS.index("api_name")
    assert sum(k[api] is None for k in got[0]) == 5 and sum(k[api] == "myLauncher" for k in got[0]) > 100


def test_the_traced_environment_and_command_keep_no_secrets(copy, tmp_path):
    """nsys records the traced process's whole environment and command line; public exports
    have carried live tokens that way. Only variables that change a profile or place a rank keep
    their values; secret-looking arguments are redacted; the database holds no trace of either."""
    from profkit.store.ingest import ingest
    f = copy(KNOWN_NSYS, "secrets.sqlite")
    token = "hf_" + "Q7" * 17
    with sqlite3.connect(f) as c:
        n = c.execute("SELECT count(*) FROM META_DATA_CAPTURE WHERE name = 'PROCESS_0:ENVIRONMENT_VARIABLE'").fetchone()[0]
        assert n > 50  # a real capture: the device machine's whole environment
        c.executemany("INSERT INTO META_DATA_CAPTURE (name, value) VALUES (?, ?)",
                      [("PROCESS_0:ENVIRONMENT_VARIABLE", f'HF_TOKEN="{token}"'),
                       ("PROCESS_0:ENVIRONMENT_VARIABLE", 'RANK="3"'),
                       ("PROCESS_0:ENVIRONMENT_VARIABLE", f'OMP_NUM_THREADS="{token}"'),
                       ("PROCESS_0:ARGUMENT_3", "--hf-token"), ("PROCESS_0:ARGUMENT_4", token),
                       ("PROCESS_0:ARGUMENT_5", "--max-new-tokens"), ("PROCESS_0:ARGUMENT_6", "32")])
    cap = nsys_sqlite.parse(f).facts["nsys_capture"]
    kept = cap["PROCESS_0:ENVIRONMENT"]
    assert kept["RANK"] == "3" and kept["NVIDIA_VISIBLE_DEVICES"] == "0" and kept["CUDA_VERSION"] == "13.0.2"
    assert set(kept) - {"RANK", "NVIDIA_VISIBLE_DEVICES"} == {k for k in kept if k.endswith("_VERSION")}
    assert {"HF_TOKEN", "OMP_NUM_THREADS", "PATH"} <= set(cap["PROCESS_0:ENVIRONMENT_NOT_KEPT"])
    assert [cap[f"PROCESS_0:ARGUMENT_{i}"] for i in range(7)] == [
        "-m", "profkit.kernels.run", "known", "--hf-token", "(redacted)", "--max-new-tokens", "32"]
    db = tmp_path / "s.db"
    ingest(db, [f], run="s")
    with sqlite3.connect(db) as c:
        dump = "\n".join(c.iterdump())
    assert token not in dump and "/opt/tiktoken_cache" not in dump and "profkit.kernels.run" in dump


@pytest.mark.parametrize("bulk", [False, True], ids=["row path", "column path"])
@pytest.mark.parametrize("change", ["start = 'x'", "\"end\" = 1.5", "globalPid = 'p'", "start = -9223372036854775807"])
def test_kernel_times_and_process_ids_that_are_not_integers_refuse_the_file(copy, monkeypatch, bulk, change):
    """Both paths check every kernel's start, end, end - start (overflow) and process id (the
    column path within its read of the kernels); one bad row refuses the whole file."""
    monkeypatch.setattr(nsys_sqlite, "BULK_MIN_ROWS", 0 if bulk else 10**18)
    p = copy(KNOWN_NSYS, "bad.nsys.sqlite")
    c = sqlite3.connect(p)
    c.execute(f"UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET {change} WHERE rowid = (SELECT max(rowid) FROM CUPTI_ACTIVITY_KIND_KERNEL)")
    c.commit()
    c.close()
    with pytest.raises(BadInput, match="1 rows whose start, end or process id is not a 64-bit integer"):
        nsys_sqlite.parse(p)


def test_the_device_of_most_launches_is_found_from_the_column_as_in_sql(copy):
    """The run's GPU is that of the device most kernels ran on: the column path counts the
    deviceId column it reads with the kernels, the row path asks SQL; both agree, ties going
    to the smaller id (the column NOT NULL here: NULLs are -1 in the column), and a value that is not an integer leaves the choice to SQL."""
    import numpy as np

    p = copy(KNOWN_NSYS, "dev.nsys.sqlite")
    c = sqlite3.connect(p)
    kt = "CUPTI_ACTIVITY_KIND_KERNEL"
    dev = "CASE WHEN deviceId IS NULL THEN -1 WHEN typeof(deviceId) = 'integer' AND deviceId >= 0 THEN deviceId ELSE -2 END"
    seen = []
    for change in ("rowid % 3 = 0", "rowid % 3 != 0", "rowid % 2 = 0", "rowid < 0"):
        c.execute(f"UPDATE {kt} SET deviceId = 0")
        c.execute(f"UPDATE {kt} SET deviceId = 7 WHERE {change}")
        column = np.array([v for (v,) in c.execute(f"SELECT {dev} FROM {kt}")])
        want = nsys_sqlite._device_of(c, kt, {"deviceId"})
        assert nsys_sqlite._device_in(c, kt, {"deviceId"}, column) == want
        seen.append(want)
    c.execute(f"UPDATE {kt} SET deviceId = 'gpu' WHERE rowid % 7 = 0")
    column = np.array([v for (v,) in c.execute(f"SELECT {dev} FROM {kt}")])
    assert (column == -2).any() and nsys_sqlite._device_in(c, kt, {"deviceId"}, column) == nsys_sqlite._device_of(c, kt, {"deviceId"})
    c.close()
    assert seen == [0, 7, seen[2], 0] and seen[2] in (0, 7)


def test_the_column_path_reads_through_adbc_without_falling_back(monkeypatch):
    """ADBC (a core dependency) reads every column of the column path: its sqlite3 fallback,
    meant for files whose odd column types the driver cannot infer, is correct but 5-10x
    slower, so on real exports it must not be taken (a broken fast path would hide behind it)."""
    from profkit.core import dbfile

    def no_fallback(*a, **k):
        raise AssertionError("read_columns fell back to sqlite3")

    monkeypatch.setattr(dbfile, "_read_sqlite3", no_fallback)
    monkeypatch.setattr(nsys_sqlite, "BULK_MIN_ROWS", 0)
    for split in (10**18, 0):  # the NVTX ranges read whole and in two halves
        monkeypatch.setattr(nsys_sqlite, "_SPLIT_ROWS", split)
        rep = nsys_sqlite.parse(KNOWN_NSYS)
        assert rep.bulk is not None and len(rep.kernels) == 166
