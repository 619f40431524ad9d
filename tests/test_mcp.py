"""profkit mcp, driven by the MCP SDK's own client over stdio: the server starts as a client
would start it (`python -m profkit mcp --db DB`), initializes, lists its tools, answers
list_runs and a SQL query, and refuses a write."""
import json
import os
import sys

import anyio
import pytest
from profdata import ROOT, runs_store

if not os.environ.get("CI"):  # in CI the test extra installs it: a missing SDK fails there
    pytest.importorskip("mcp", reason="pip install 'profkit[mcp]'")
from mcp import Client, StdioServerParameters  # noqa: E402

RUNS = ["hf-llama-decode"]
store = runs_store("mcp", RUNS)
TOOLS = {"list_runs", "sql", "classify", "advise", "compare", "phases", "hotspots"}


def _session(db, script):
    """Run `script(client)` against a server process on `db`; returns what it returns."""
    params = StdioServerParameters(command=sys.executable, args=["-m", "profkit", "mcp", "--db", str(db)],
                                   cwd=str(ROOT), env={**os.environ, "PYTHONPATH": str(ROOT)})

    async def main():
        with anyio.fail_after(120):
            async with Client(params) as client:
                return await script(client)

    return anyio.run(main)


def _text(result) -> str:
    return "".join(c.text for c in result.content if getattr(c, "type", "") == "text")


def test_a_client_lists_runs_and_queries(store):
    store.conn.commit()

    async def script(client):
        tools = await client.list_tools()
        runs = await client.call_tool("list_runs", {})
        q = await client.call_tool("sql", {"query": "SELECT run, count(*) AS n FROM kernels GROUP BY run"})
        write = await client.call_tool("sql", {"query": "DELETE FROM run"})
        attach = await client.call_tool("sql", {"query": "ATTACH DATABASE ':memory:' AS x"})
        missing = await client.call_tool("advise", {"run": "nope"})
        ph = await client.call_tool("phases", {"run": "hf-llama-decode"})
        return tools, runs, q, write, attach, missing, ph

    tools, runs, q, write, attach, missing, ph = _session(store.path, script)
    by_name = {t.name: t for t in tools.tools}
    assert set(by_name) == TOOLS
    assert all(t.annotations.read_only_hint for t in tools.tools)
    assert not runs.is_error and [r["run"] for r in json.loads(_text(runs))] == RUNS
    assert json.loads(_text(q)) == {"columns": ["run", "n"], "rows": [["hf-llama-decode", 3369]], "truncated": False}
    assert write.is_error and "refused" in _text(write) and "read-only" in _text(write)
    assert attach.is_error and "refused" in _text(attach)
    assert missing.is_error and "no run named 'nope'" in _text(missing)
    assert [p["name"] for p in json.loads(_text(ph))["phases"]][:2] == ["startup", "steps"]
    # the write was refused, not merely reported: the run is still there
    assert store.query("SELECT count(*) AS n FROM run")[0]["n"] == 1


def test_missing_database_is_one_line(tmp_path):
    import subprocess

    r = subprocess.run([sys.executable, "-m", "profkit", "mcp", "--db", str(tmp_path / "none.db")],
                       capture_output=True, text=True, cwd=ROOT, stdin=subprocess.DEVNULL, timeout=60)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "no such database" in r.stderr
