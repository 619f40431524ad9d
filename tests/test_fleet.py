"""Many ranks: parallel ingest, the Parquet export and the fleet analyses through DuckDB.

A 16-rank run synthesised by benchmarks/fleet.py from the real two-H200 DDP capture
(profiles/ddp-2gpu-slow: rank 1 is slow, rank 0 waits for it): every rank a copy of the waiting
rank but one planted straggler, a copy of the slow one, with clock offsets and duration jitter.
The fleet SQL is checked against profkit ranks (SQLite, Python) on the real two ranks, value
for value. Spark runs the same SQL text in benchmarks/fleet.py only (pyspark is a 456 MB
install and its local session alone takes ~20 s): here the text runs on DuckDB."""
import importlib.util
import json
import sqlite3

import pytest
from click.testing import CliRunner
from profdata import PROFILES, ROOT

from profkit.analyses import fleet as fl
from profkit.analyses import ranks as rk
from profkit.cli import cli
from profkit.core.errors import BadInput
from profkit.outputs.parquet import export_parquet
from profkit.store.ingest import ingest
from profkit.store.profiles import report_files
from profkit.store.store import Store

SLOW = PROFILES / "ddp-2gpu-slow"
RANKS, STRAGGLER = 16, 11


def _bench():
    spec = importlib.util.spec_from_file_location("bench_fleet", ROOT / "benchmarks" / "fleet.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def two(tmp_path_factory):
    """The real two ranks: SQLite and their Parquet export."""
    d = tmp_path_factory.mktemp("two")
    db = str(d / "two.db")
    ingest(db, report_files(SLOW), run=SLOW.name)
    export_parquet(db, d / "pq")
    return db, d / "pq"


@pytest.fixture(scope="module")
def fleet16(tmp_path_factory):
    d = tmp_path_factory.mktemp("fleet")
    files = _bench().synthesise(d / "fleet", RANKS, STRAGGLER)
    db = str(d / "fleet.db")
    loaded = ingest(db, [d / "fleet"], workers=2)
    export_parquet(db, d / "pq")
    return db, d / "pq", files, loaded


def test_fleet_sql_matches_ranks_on_the_real_two_ranks(two):
    db, pq = two
    with Store(db, readonly=True) as s:
        r = rk.analyse(s, SLOW.name)
    e = fl.open_dataset(pq)
    got = {(x["rank"], x["step"]): x for x in fl.rank_steps(e, SLOW.name)}
    assert len(got) == len(r.per_rank_step) == 10
    for x in r.per_rank_step:
        g = got[(x.rank, x.step)]
        for k in ("kernels", "comm_kernels", "window_ns", "compute_ns", "comm_ns", "overlap_ns", "exposed_comm_ns",
                  "idle_ns", "wait_ns"):
            assert g[k] == getattr(x, k), (x.rank, x.step, k)
    f = fl.ranks(e)
    assert f.slowest_rank == {SLOW.name: r.slowest_rank} == {SLOW.name: 1}
    assert [p["slowest_in_steps"] for p in f.per_rank] == [p["slowest_in_steps"] for p in r.per_rank] == [0, 5]


def test_parallel_ingest_loads_every_rank_as_one_by_one(fleet16, tmp_path):
    db, _, files, loaded = fleet16
    assert sorted(x.rank for x in loaded) == list(range(RANKS))
    seq = str(tmp_path / "seq.db")
    ingest(seq, files[:3], run="fleet", workers=1)
    par = str(tmp_path / "par.db")
    ingest(par, files[:3], run="fleet", workers=3)
    q = "SELECT rank, count(*), sum(duration_ns), sum(start_ns) FROM kernels GROUP BY rank ORDER BY rank"
    a, b = sqlite3.connect(seq), sqlite3.connect(par)
    assert a.execute(q).fetchall() == b.execute(q).fetchall()
    assert len(a.execute(q).fetchall()) == 3


def test_parallel_ingest_refuses_the_whole_batch_on_one_bad_file(fleet16, tmp_path):
    _, _, files, _ = fleet16
    bad = tmp_path / "fleet.rank99.nsys.sqlite"
    bad.write_bytes(files[0].read_bytes()[:50_000])  # a cut export
    db = str(tmp_path / "bad.db")
    with pytest.raises(BadInput):
        ingest(db, [*files[:3], bad], run="fleet", workers=2)
    assert not (tmp_path / "bad.db").exists() or sqlite3.connect(db).execute(
        "SELECT count(*) FROM report_file").fetchone() == (0,)


def test_duckdb_finds_the_planted_straggler(fleet16):
    _, pq, _, _ = fleet16
    e = fl.open_dataset(pq, fl.DuckDB(memory_limit="256MB", threads=1))
    f = fl.ranks(e)
    assert f.slowest_rank == {"fleet": STRAGGLER}
    assert len(f.per_rank) == RANKS
    mine = {p["rank"]: p for p in f.per_rank}
    assert mine[STRAGGLER]["slowest_in_steps"] == 5
    assert all(mine[r]["wait_ns"] > 10 * mine[STRAGGLER]["wait_ns"] for r in mine if r != STRAGGLER)
    adv = {a["rank"]: a for a in fl.advise(e)}
    assert adv[STRAGGLER]["slowest"] and adv[0]["first_fix"].startswith("waits for other ranks")
    top = fl.kernels(e, top=1)[0]
    assert top["short_name"] == "ncclDevKernel_AllReduce_Sum_bf16_RING_LL" and top["ranks"] == RANKS
    labels = {(c["rank"], c["label"]) for c in fl.classify(e)}
    assert (STRAGGLER, "communication") in labels and (0, "unknown") in labels


def test_cli_fleet_ranks_names_the_straggler(fleet16):
    _, pq, _, _ = fleet16
    res = CliRunner().invoke(cli, ["fleet", "ranks", str(pq), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["slowest_rank"] == {"fleet": STRAGGLER}
    res = CliRunner().invoke(cli, ["fleet", "ranks", str(pq), "--run", "nope"])
    assert res.exit_code == 2 and "no run named 'nope'" in res.output


def test_fleet_refuses_a_folder_that_is_not_an_export(tmp_path):
    res = CliRunner().invoke(cli, ["fleet", "kernels", str(tmp_path)])
    assert res.exit_code == 2 and "not a profkit Parquet export" in res.output
    with pytest.raises(BadInput):
        fl.open_dataset(tmp_path)


def test_the_sql_text_keeps_to_what_spark_reads():
    """What Spark SQL would refuse or read otherwise: DuckDB-only FILTER, ::casts, backslashes
    (Spark's literals unescape them), QUALIFY."""
    for text in (fl.RANK_STEP_SQL, *fl.ANALYSES.values()):
        assert "FILTER (" not in text and "::" not in text and "\\" not in text and "QUALIFY" not in text
