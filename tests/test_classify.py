"""Known answers from the real H200 capture of profkit.kernels.known (nsys + ncu)."""

import json
import shutil

import pytest
from click.testing import CliRunner
from profdata import KNOWN_NCU, KNOWN_NCU_LEAN, KNOWN_NSYS

from profkit.analyses.classify import LABELS
from profkit.cli import cli
from profkit.store.ingest import ingest
from profkit.store.store import Store


def _labels(db, run):
    r = CliRunner().invoke(cli, ["classify", "--db", db, "--run", run, "--json"])
    assert r.exit_code == 0, r.output
    return json.loads(r.output)


def _time_share(db, run, rows, nvtx_range, label):
    s = Store(db)
    dur = {
        k["kernel_id"]: k["duration_ns"]
        for k in s.query("SELECT kernel_id, duration_ns FROM kernels WHERE run = ?", (run,))
    }
    s.close()
    mine = [r for r in rows if r["nvtx_range"] == nvtx_range]
    return sum(dur[r["kernel_id"]] for r in mine if r["label"] == label) / sum(dur[r["kernel_id"]] for r in mine)


@pytest.fixture(scope="module")
def both(tmp_path_factory):
    db = str(tmp_path_factory.mktemp("c") / "c.db")
    ingest(db, [KNOWN_NSYS, KNOWN_NCU], run="known")
    return db, _labels(db, "known")


def test_known_answers_timeline_and_counters(both):
    db, rows = both
    assert {r["label"] for r in rows} <= set(LABELS)
    by = {}
    for r in rows:
        by.setdefault(r["nvtx_range"], set()).add(r["label"])
    assert by["bf16_4096"] == {"tensor_core"}  # cuBLAS GEMM, 14.6 % achieved occupancy by design
    assert by["rmsnorm_triton"] == {"dram"}
    assert by["burst"] == {"launch_overhead"}  # 2 us, one block: launch overhead, not occupancy
    assert by["occupancy_limited"] == {"occupancy"}
    assert _time_share(db, "known", rows, "rmsnorm_eager", "dram") > 0.5
    gemm = next(r for r in rows if r["nvtx_range"] == "bf16_4096")
    ev = json.loads(gemm["evidence"])
    assert ev["rule"] == "tensor_core" and ev["values"]["tensor_pct"] > 90 and ev["values"]["achieved_occupancy"] < 20
    assert "HighPipeUtilization" in ev["citation"]
    occ = json.loads(next(r for r in rows if r["nvtx_range"] == "occupancy_limited")["evidence"])
    assert (
        occ["values"]["limit_shared_mem"] == 1
        and "shared_mem" in next(r for r in rows if r["nvtx_range"] == "occupancy_limited")["reason"]
    )


def test_counters_only(db):
    ingest(db, [KNOWN_NCU_LEAN], run="ncu")
    rows = _labels(db, "ncu")
    by = {}
    for r in rows:
        by.setdefault(r["nvtx_range"], set()).add(r["label"])
    assert by["bf16_4096"] == {"tensor_core"} and by["rmsnorm_triton"] == {"dram"}
    assert by["burst"] == {"launch_overhead"} and by["occupancy_limited"] == {"occupancy"}


def test_timeline_only(db):
    ingest(db, [KNOWN_NSYS], run="nsys")
    rows = _labels(db, "nsys")
    burst = {r["label"] for r in rows if r["nvtx_range"] == "burst"}
    assert burst == {"launch_overhead"}
    gemm = [r for r in rows if r["nvtx_range"] == "bf16_4096"]
    # no counters, no shapes: the timeline alone cannot tell; the kernel family (a cuBLAS nvjet
    # GEMM of 170 us) gives tensor_core, as this GEMM's counters do (test_counters_only), and
    # says it is a guess from the name
    assert {r["label"] for r in gemm} == {"tensor_core"}
    assert all(json.loads(r["evidence"])["rule"] == "family" for r in gemm)
    assert all(r["reason"].startswith("from the kernel family: cuBLAS") and "a guess" in r["reason"] for r in gemm)


def test_classifications_view(both):
    db, _ = both
    r = CliRunner().invoke(
        cli,
        [
            "sql",
            "--db",
            db,
            "--json",
            "SELECT label, json_extract(evidence, '$.rule') = 'family' fam, count(*) n"
            " FROM classifications WHERE run='known' GROUP BY 1, 2 ORDER BY 1, 2",
        ],
    )
    got = {(x["label"], x["fam"]): x["n"] for x in json.loads(r.output)}
    assert got[("launch_overhead", 0)] >= 100 and got[("tensor_core", 0)] == 3 and got[("occupancy", 0)] == 3
    # the one GEMM launch ncu did not measure: labelled from its family, and SQL tells it apart
    assert got[("tensor_core", 1)] == 1


def test_every_rule_is_documented():
    from profdata import ROOT

    from profkit.analyses.classify import RULES

    doc = (ROOT / "docs" / "classification.md").read_text()
    for rule in RULES:
        assert f"`{rule}`" in doc, rule


def test_kept_counters_answer_as_fresh_reads_and_forget_on_a_change(tmp_path):
    """Store.keep_counters (the main job): every read, full or of some metrics, sampled or not,
    equals the database's answer; a report added to the run, or another connection's commit,
    is seen at the next read."""
    from profdata import PROFILES

    from profkit.store.ingest import ingest

    db = str(tmp_path / "k.db")
    ingest(db, [PROFILES / "known"])
    some = ["gpu__time_duration.sum", "dram__bytes.sum", "device__attribute_compute_capability_major", "nope"]
    fresh = Store(db)
    with Store(db) as s, s.keep_counters():
        for run in s.runs():
            for metrics in (None, some, []):
                for sampled in (True, False):
                    got, want = s.counters(run, metrics, sampled), fresh.counters(run, metrics, sampled)
                    assert got == want and list(got) == list(want)
                    assert all(list(got[k]) == list(want[k]) for k in got)
        before = s.counters("known")
        assert before and s.counters("known") == before
        # another connection changes the run: the next read sees it
        fresh.conn.execute("DELETE FROM counter WHERE metric = 'gpu__time_duration.sum'")
        assert s.counters("known") == fresh.counters("known") != before
        # a report this Store adds forgets that run's counters (another capture's: as another rank,
        # since a run takes one timeline and one counter report per rank)
        ingest(db, [PROFILES / "cuda-vs-triton-h200"], run="known", rank=1, store=s)
        assert s.counters("known") == fresh.counters("known")
        assert len(s.counters("known")) > len(before)
    fresh.close()


def test_launches_without_counters_label_as_the_general_path(profiles_db_built, tmp_path, monkeypatch):
    """label_rows labels launches without counters on one GPU row by a short path (most of a
    timeline): the same rows, evidence text included, as the general path on shipped runs
    (timeline only, timeline + counters, a multi-rank run with NCCL kernels)."""
    from profkit.analyses import classify as cl

    db = str(tmp_path / "f.db")
    shutil.copyfile(profiles_db_built, db)
    with Store(db) as s:
        runs = ["e2e-decode", "ddp-2gpu", "hf-llama-decode", "known", "rmsnorm-eager-vs-triton-h200"]
        fast = {r: cl.label_rows(s, r) for r in runs}
        monkeypatch.setattr(cl, "_fast", False)
        for r in runs:
            assert fast[r] == cl.label_rows(s, r)
        assert sum(1 for r in runs for row in fast[r] if json.loads(row["evidence"])["timeline"]) > 10_000


def test_a_measured_launchs_siblings_carry_its_values_and_their_own_timeline(tmp_path):
    """The launches that read a measured sibling's counters (sampled_from) share its values,
    made once, and each carries its own timeline in an evidence JSON written as json.dumps
    writes it: cuda-vector-ops, 649 such launches of 7 measured ones."""
    from profdata import PROFILES

    from profkit.analyses.classify import label_rows
    from profkit.store.profiles import load_profiles

    root = tmp_path / "p"
    shutil.copytree(PROFILES / "cuda-vector-ops", root / "cuda-vector-ops")
    db = str(tmp_path / "v.db")
    load_profiles(root, db)
    with Store(db) as s:
        rows = [r for r in label_rows(s, "cuda-vector-ops") if r["sampled_from"] is not None]
        own = {
            k: {"api_ns": a, "duration_ns": d, "gap_ns": g}
            for k, d, a, g in s.conn.execute(
                "SELECT id, duration_ns, api_end_ns - api_start_ns, start_ns - lag(end_ns) OVER (PARTITION BY device,"
                " stream ORDER BY start_ns) FROM launch_row WHERE run = 'cuda-vector-ops' AND source != 'ncu'"
            )
        }
    assert len(rows) == 649
    kept: dict = {}
    for r in rows:
        e = json.loads(r["evidence"])
        assert r["evidence"] == json.dumps(e, sort_keys=True)
        assert e["timeline"] == own[r["kernel_id"]] and e["sampled_from"] == r["sampled_from"]
        assert "duration" not in e["values"]  # the timeline's duration is the launch's, not the measured one's
        rest = {k: v for k, v in e.items() if k != "timeline"}
        assert kept.setdefault((r["sampled_from"], r["label"]), rest) == rest
    assert len({k[0] for k in kept}) == 7


def test_stored_labels_read_as_the_rows_they_were_made_from(profiles_db_built, tmp_path, monkeypatch):
    """classify's table path labels the launches without counters as columns and stores each
    distinct evidence JSON once (label_evidence), the timeline per launch: the classifications
    view gives back label_rows' text, reason and evidence alike, and the table is by_range's
    (timeline only, timeline + counters with ncu rules, a multi-rank run with NCCL kernels); the
    launches the timeline leaves unknown in a run without operator shapes are labelled from their
    kernel family as columns too."""
    from profkit.analyses import classify as cl
    from profkit.analyses import shape_labels

    db = str(tmp_path / "f.db")
    shutil.copyfile(profiles_db_built, db)
    by_family = []
    groups = shape_labels.family_groups
    monkeypatch.setattr(shape_labels, "family_groups", lambda *a: by_family.append(a[1]) or groups(*a))
    with Store(db) as s:
        runs = ["e2e-decode", "ddp-2gpu", "hf-llama-decode", "known", "rmsnorm-eager-vs-triton-h200"]
        columns, total = 0, (0, 0)
        for r in runs:
            rows = cl.label_rows(s, r)
            columns += cl._classify_columns(s, r) is not None
            table = cl.by_range(s, r, rows)
            assert cl.classify_by_range(s, r) == table
            stored = s.query("SELECT * FROM classifications WHERE run = ? ORDER BY kernel_id", (r,))
            want = [{k: x[k] for k in ("kernel_id", "kernel_name", "label", "reason", "evidence")} for x in rows]
            assert [{k: x[k] for k in want[0]} for x in stored] == sorted(want, key=lambda x: x["kernel_id"])
            cl.classify(s, r)  # the same rows stored one at a time
            assert s.query("SELECT * FROM classifications WHERE run = ? ORDER BY kernel_id", (r,)) == stored
            monkeypatch.setattr(cl, "_fast", False)  # the table path without columns: the same
            assert cl.classify_by_range(s, r) == table
            assert s.query("SELECT * FROM classifications WHERE run = ? ORDER BY kernel_id", (r,)) == stored
            monkeypatch.setattr(cl, "_fast", True)
            shared, launches = s.conn.execute(
                "SELECT (SELECT count(*) FROM label_evidence WHERE run = ?), count(*) FROM label WHERE run = ?", (r, r)
            ).fetchone()
            assert launches == len(rows) and shared <= launches
            total = (total[0] + shared, total[1] + launches)
        assert not s.conn.execute("PRAGMA foreign_key_check(label)").fetchall()  # (written unchecked)
        assert columns >= 3  # (a run with several candidate GPUs, or operators with shapes: the general path)
        assert by_family, "no run labelled its unknown launches from their family as columns"
        assert total[0] < total[1] / 20, total  # most launches share their evidence JSON


@pytest.mark.parametrize(
    "change, which",
    [
        ("duration_ns = duration_ns + 0.5", "%launch call%"),
        ("start_ns = start_ns + 0.25", "%launch call%"),
        ("grid_x = grid_x + 0.5", "%GEMM of%"),
        ("grid_y = 'wide'", "%GEMM of%"),
    ],
)
def test_launch_values_that_are_not_integers_label_as_the_general_path(
    profiles_db_built, tmp_path, monkeypatch, change, which
):
    """The column path reads the launches strictly typed; a duration, start or grid of another
    type (a real number, text) on a launch whose label shows it makes it read again with typeof(): the table and the stored labels are the general
    path's (e2e-decode, timeline only)."""
    from profkit.analyses import classify as cl

    db = str(tmp_path / "odd.db")
    shutil.copyfile(profiles_db_built, db)
    run = "e2e-decode"
    with Store(db) as s:
        cl.classify_by_range(s, run)
        (at,) = s.conn.execute(
            "SELECT min(kernel_id) FROM classifications WHERE run = ? AND reason LIKE ?", (run, which)
        ).fetchone()
        with s.conn:
            s.conn.execute(f"UPDATE launch_row SET {change} WHERE id = ?", (at,))
    typed = []
    columns = cl._launch_columns
    monkeypatch.setattr(cl, "_launch_columns", lambda *a: typed.append(a[2]) or columns(*a))
    with Store(db) as s:
        fast = cl.classify_by_range(s, run)
        stored = s.query("SELECT * FROM classifications WHERE run = ? ORDER BY kernel_id", (run,))
    assert typed, "the column path was not taken"
    monkeypatch.setattr(cl, "_fast", False)
    with Store(db) as s:
        assert cl.classify_by_range(s, run) == fast
        assert s.query("SELECT * FROM classifications WHERE run = ? ORDER BY kernel_id", (run,)) == stored


def test_launches_read_in_halves_label_as_one_read(profiles_db_built, tmp_path, monkeypatch):
    """On a large run the launches are read as two halves of its row ids at once: the table and
    the stored labels are those of one read (e2e-decode; llama-decode-cudagraphs, whose labels
    read counters)."""
    from profkit.analyses import classify as cl
    from profkit.core.dbfile import Joined
    from profkit.store import store as store_module

    db = str(tmp_path / "halves.db")
    shutil.copyfile(profiles_db_built, db)
    for run in ("e2e-decode", "llama-decode-cudagraphs"):
        with Store(db) as s:
            assert not isinstance(cl._read_launches(s, run), Joined)
            whole = cl.classify_by_range(s, run)
            stored = s.query("SELECT * FROM classifications WHERE run = ? ORDER BY kernel_id", (run,))
        monkeypatch.setattr(store_module, "SPLIT", 2)
        with Store(db) as s:
            halves = cl._read_launches(s, run)
            assert isinstance(halves, Joined)
            assert all(len(h.result()[0][0]) for h in halves._reads), run  # (each half has launches)
            assert cl.classify_by_range(s, run) == whole
            assert s.query("SELECT * FROM classifications WHERE run = ? ORDER BY kernel_id", (run,)) == stored
        monkeypatch.setattr(store_module, "SPLIT", 200_000)


def test_a_grid_whose_blocks_pass_64_bits_is_no_grid(profiles_db_built, tmp_path):
    """A damaged grid whose blocks do not fit 64 bits (SQLite's product is then a real number)
    reads as no grid, never as its product wrapped round to a few blocks (which the tiny-grid
    rule would call launch overhead)."""
    from profkit.analyses import classify as cl

    db = str(tmp_path / "grid.db")
    shutil.copyfile(profiles_db_built, db)
    run = "e2e-decode"
    with Store(db) as s:
        (at,) = s.conn.execute("SELECT min(id) FROM launch_row WHERE run = ?", (run,)).fetchone()
        with s.conn:
            s.conn.execute(
                "UPDATE launch_row SET grid_x = 1 << 40, grid_y = 1 << 40, grid_z = 1 << 10 WHERE id = ?", (at,)
            )
    with Store(db) as s:  # (a connection that has written reads on itself, never strictly typed)
        cols = cl._launch_columns(s, run, cl._read_launches(s, run))
    assert cols is not None
    kid, blocks = cols[0], cols[7]
    assert blocks[kid == at].tolist() == [cl._NULL]
    assert (blocks[kid != at] != cl._NULL).any()


def test_stream_gaps_are_sqlites_window_and_ties_are_left_to_it():
    """classify's idle gap as a column is the _GAP window's value of every timed launch (streams
    of several devices, a NULL stream, untimed launches between them); two launches of a stream
    that start together give None (SQLite's sort orders them)."""
    import sqlite3

    import numpy as np

    from profkit.analyses.classify import _GAP, _NULL, stream_gaps

    rng = np.random.default_rng(7)
    n = 400
    start = rng.choice(np.arange(10**6), n, replace=False)
    end = start + rng.integers(1, 5_000, n)
    device, stream = rng.integers(0, 2, n), rng.integers(0, 3, n)
    null_stream, untimed = rng.random(n) < 0.1, rng.random(n) < 0.2
    c = sqlite3.connect(":memory:")
    c.execute("CREATE TABLE launch_row (id INTEGER PRIMARY KEY, source, device, stream, start_ns, end_ns)")
    c.executemany(
        "INSERT INTO launch_row VALUES (?, ?, ?, ?, ?, ?)",
        [
            (i + 1, "ncu" if u else "nsys", int(d), None if ns else int(st), int(s), int(e))
            for i, (d, st, ns, u, s, e) in enumerate(zip(device, stream, null_stream, untimed, start, end))
        ],
    )
    want = dict(c.execute(f"SELECT id, {_GAP} FROM launch_row"))
    stream_col = np.where(null_stream, _NULL, stream)
    got = stream_gaps(~untimed, device, stream_col, start, end, _NULL)
    assert got is not None
    timed = [i for i in range(n) if not untimed[i]]
    assert [None if got[i] == _NULL else int(got[i]) for i in timed] == [want[i + 1] for i in timed]
    assert sum(want[i + 1] is not None for i in timed) > n // 2
    a, b = (
        timed[0],
        next(i for i in timed[1:] if device[i] == device[timed[0]] and stream_col[i] == stream_col[timed[0]]),
    )
    start[b] = start[a]
    assert stream_gaps(~untimed, device, stream_col, start, end, _NULL) is None


def test_label_columns_write_the_rows_one_at_a_time_would(tmp_path, monkeypatch):
    """Labels.add_columns (ids, gaps and kinds packed per chunk) stores what add() stores for
    the same launches: timed and untimed kinds, own reasons and shared ones, NULL gaps, negative
    ones and those too far from the rest to pack, chunks of a few rows, and chunks split where
    ids lie too far apart for the packing."""
    from profkit.store import write

    db = str(tmp_path / "l.db")
    ingest(db, [KNOWN_NSYS], run="known")
    with Store(db) as s:
        c = s.conn
        launches = c.execute(
            "SELECT id, duration_ns, api_end_ns - api_start_ns FROM launch_row WHERE run = 'known' ORDER BY id"
        ).fetchall()[::3]  # ids 3 apart
        kinds = [("unknown", None, True), ("launch_overhead", "its own", True), ("unknown", None, False)]
        code = [i % 3 for i in range(len(launches))]
        # NULLs, overlaps, gaps far outside 32 bits of the least (set after the insert)
        far = (-(1 << 40), 1 << 40, 5 << 33, -(1 << 31) - 1)
        gap = [-(1 << 63) if i % 5 == 0 else far[i % 4] if i % 7 == 0 else i - 20 for i in range(len(launches))]

        def labels():
            w = write.Labels(c, "known")
            return w, [
                (lab, why, w.evidence(f'{{"rule": "r{i}"}}', None, "shared")[0], t)
                for i, (lab, why, t) in enumerate(kinds)
            ]

        def stored():
            return c.execute("SELECT * FROM label WHERE run = 'known' ORDER BY kernel_id").fetchall()

        with c:
            w, ks = labels()
            w.add(
                (k, "known", *ks[x][:3], *((a, d, None if g == -(1 << 63) else g) if ks[x][3] else (None,) * 3))
                for (k, d, a), x, g in zip(launches, code, gap)
            )
        one_at_a_time = stored()
        assert len(one_at_a_time) == len(launches) > 20
        # 5 bits: 2 for the kind, 2 for the gap (most set after), ids 2 apart a chunk each
        for chunk, pack in ((7, 62), (1 << 20, 62), (1 << 20, 5)):
            monkeypatch.setattr(write, "_PACK_BITS", pack)
            with c:
                w, ks = labels()
                w.add_columns([k for k, *_ in launches], ks, code, gap, -(1 << 63), chunk=chunk)
            assert stored() == one_at_a_time
