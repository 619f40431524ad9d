"""profkit export --parquet: the shipped profiles (single-process runs and the two-rank DDP
runs) exported, then read back by DuckDB (embedded, no profkit) with the same aggregates as
`profkit sql`."""
import json
import os

import pytest
from click.testing import CliRunner
from profdata import PROFILES

from profkit.analyses.overview import run_summary
from profkit.cli import cli
from profkit.store.ingest import ingest
from profkit.store.store import Store

duckdb = pytest.importorskip("duckdb")
pytest.importorskip("pyarrow")

AGG = ("SELECT run, rank, count(*) AS n, sum(duration_ns) AS t, count(DISTINCT short_name) AS names "
       "FROM {kernels} GROUP BY run, rank ORDER BY run, rank NULLS FIRST")
COUNTERS = ("SELECT run, rank, metric, count(*) AS n, sum(value) AS v FROM {counters} "
            "WHERE metric IN ('gpu__time_duration.sum', 'dram__bytes.sum') GROUP BY 1, 2, 3 ORDER BY 1, 2 NULLS FIRST, 3")


@pytest.fixture(scope="module")
def exported(tmp_path_factory, profiles_db):
    d = tmp_path_factory.mktemp("export")
    db = profiles_db
    # ncu's rule results: the H100 field capture's report (the shipped ones use the lean set)
    ingest(db, [PROFILES.parent / "tests" / "data" / "field-h100" / "ws_rules.ncu-rep.xz"], run="ws-rules")
    s = Store(db)
    try:
        for run in s.runs():
            run_summary(s, run)  # labels and advice, as the main job stores them
    finally:
        s.close()
    r = CliRunner().invoke(cli, ["export", "--db", db, "--parquet", str(d / "pq")])
    assert r.exit_code == 0, r.output
    return db, d / "pq", r.output


def sql(db, query):
    r = CliRunner().invoke(cli, ["sql", "--db", db, "--json", query])
    assert r.exit_code == 0, r.output
    return [tuple(row.values()) for row in json.loads(r.output)]


def parquet(root, view):
    types = "" if view == "runs" else ", hive_types = {'rank': BIGINT}"  # runs has no rank partition
    return f"read_parquet('{root}/{view}/**/*.parquet', hive_partitioning = true{types})"


def test_duckdb_reads_the_same_aggregates_as_profkit_sql(exported):
    db, root, _ = exported
    con = duckdb.connect()
    want = sql(db, AGG.format(kernels="kernels"))
    got = con.execute(AGG.format(kernels=parquet(root, "kernels"))).fetchall()
    assert got == want
    assert any(r[1] is None for r in got) and {r[1] for r in got} >= {None, 0, 1}  # single-process and ranked runs
    want = sql(db, COUNTERS.format(counters="counters"))
    got = con.execute(COUNTERS.format(counters=parquet(root, "counters"))).fetchall()
    assert [r[:4] for r in got] == [r[:4] for r in want] and got
    assert all(g[4] == pytest.approx(w[4], rel=1e-12) for g, w in zip(got, want))
    q = "SELECT label, rank, count(*) FROM {v} GROUP BY 1, 2 ORDER BY 1, 2 NULLS FIRST"
    assert con.execute(q.format(v=parquet(root, "classifications"))).fetchall() == sql(db, q.format(v="classifications"))
    q = "SELECT run, rule, severity, count(*), sum(estimated_speedup_pct) FROM {v} GROUP BY 1, 2, 3 ORDER BY 1, 2, 3"
    want = sql(db, q.format(v="rules"))
    assert want and con.execute(q.format(v=parquet(root, "rules"))).fetchall() == want
    q = "SELECT run, rank, scope, label, recoverable_ns, action FROM {v} ORDER BY run, scope, rank"
    want = sql(db, q.format(v="advice"))
    assert len({r[0] for r in want}) >= 19  # every shipped run, and more
    assert con.execute(q.format(v=f"read_parquet('{root}/advice/**/*.parquet', hive_partitioning = true)")).fetchall() == want
    q = "SELECT run, gpu_name FROM {v} ORDER BY run"
    assert con.execute(q.format(v=parquet(root, "runs"))).fetchall() == sql(db, q.format(v="runs"))


def test_partitions_are_hive_folders_by_run_and_rank(exported):
    _, root, output = exported
    runs = sorted(p.name for p in (root / "runs").iterdir())
    assert "run=known" in runs and "run=ddp-2gpu-slow" in runs
    assert sorted(p.name for p in (root / "kernels" / "run=ddp-2gpu-slow").iterdir()) == ["rank=0", "rank=1"]
    assert [p.name for p in (root / "kernels" / "run=known").iterdir()] == ["rank=__HIVE_DEFAULT_PARTITION__"]
    assert (root / "kernels" / "run=known" / "rank=__HIVE_DEFAULT_PARTITION__" / "part-0.parquet").is_file()
    assert f"{root / 'kernels'}:" in output


def test_export_of_one_run_replaces_only_its_partitions(exported, tmp_path):
    db, root, _ = exported
    before = {p: p.stat().st_mtime_ns for p in (root / "kernels").rglob("*.parquet")}
    r = CliRunner().invoke(cli, ["export", "--db", db, "--parquet", str(root), "--run", "known"])
    assert r.exit_code == 0, r.output
    after = {p: p.stat().st_mtime_ns for p in (root / "kernels").rglob("*.parquet")}
    assert set(after) == set(before)
    changed = {p.relative_to(root).parts[1] for p in after if after[p] != before[p]}
    assert changed == {"run=known"}


def test_bad_run_and_missing_pyarrow_are_one_line(exported, monkeypatch, tmp_path):
    db, _, _ = exported
    r = CliRunner().invoke(cli, ["export", "--db", db, "--parquet", str(tmp_path / "x"), "--run", "nope"])
    assert r.exit_code != 0 and "no run named 'nope'" in r.output and "Traceback" not in r.output
    import builtins

    real = builtins.__import__

    def no_pyarrow(name, *a, **k):
        if name.startswith("pyarrow"):
            raise ImportError(name)
        return real(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_pyarrow)
    r = CliRunner().invoke(cli, ["export", "--db", db, "--parquet", str(tmp_path / "x")])
    assert r.exit_code == 3 and r.output.strip().splitlines()[-1].endswith("(or pip install pyarrow)")
    assert not os.path.exists(tmp_path / "x")


def test_readme_duckdb_query_matches_the_spark_query_run_by_profkit_sql(exported):
    """The README's two queries: DuckDB over the export, and the Spark SQL SELECT (plain SQL
    that SQLite also runs) through `profkit sql`, give the same rows."""
    import re

    from profdata import ROOT

    block = re.search(r"```sql\n(.*?)```", (ROOT / "README.md").read_text(), re.S).group(1)
    duck = block.split("-- DuckDB\n")[1].split("\n\n")[0]
    spark = block.split("-- Spark SQL")[1].split("\n", 2)[2]  # after the CREATE VIEW line
    db, root, _ = exported
    got = duckdb.connect().execute(duck.replace("'export/", f"'{root}/")).fetchall()
    want = sql(db, spark.strip().rstrip(";"))
    assert [g[:3] for g in got] == [w[:3] for w in want] and len(got) >= 4
    assert all((g[3] is None and w[3] is None) or g[3] == pytest.approx(w[3], rel=1e-12) for g, w in zip(got, want))
