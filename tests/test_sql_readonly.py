import pytest
from click.testing import CliRunner
from profdata import KNOWN_CUPTI

from profkit.cli import cli
from profkit.store.ingest import ingest


@pytest.mark.parametrize("query", [
    "DELETE FROM launch", "INSERT INTO run VALUES ('x', 'now', NULL, '{}')", "DROP VIEW kernels",
    "ATTACH DATABASE '/tmp/evil.db' AS evil", "PRAGMA journal_mode = DELETE", "CREATE TABLE t (a)",
    "SELECT load_extension('/tmp/x.so')", "UPDATE launch SET duration_ns = 0",
    "VACUUM INTO '/tmp/copy.db'", "CREATE TEMP TABLE t (a)", "SAVEPOINT s", "REINDEX", "ANALYZE",
    # launch is a view over launch_row (schema 10): its tables refuse writes too
    "DELETE FROM launch_row", "UPDATE launch_row SET duration_ns = 0", "INSERT INTO launch_name (name) VALUES ('x')",
    "DELETE FROM launch_nvtx",
])
def test_sql_cannot_write(db, query):
    ingest(db, [KNOWN_CUPTI], run="r")
    r = CliRunner().invoke(cli, ["sql", "--db", db, query])
    assert r.exit_code != 0 and r.output.startswith("profkit: ") and "Traceback" not in r.output
    ok = CliRunner().invoke(cli, ["sql", "--db", db, "--csv", "SELECT count(*) AS n FROM kernels"])
    assert ok.output.splitlines() == ["n", "166"]
