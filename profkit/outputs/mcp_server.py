"""profkit mcp: a Model Context Protocol server over stdio, so a coding agent can ask about the
profiles in one database (docs/mcp.md).

Every tool reads: the database is opened read-only for each call (labels and advice are
computed, never stored), and `sql` runs through profkit.store.query, the guard of `profkit sql`
(read-only connection and authorizer, a time limit, a memory cap). Each tool answers JSON text;
a tool that fails answers one line (MCP's isError), as the CLI would print it.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from pathlib import Path
from typing import Any

from profkit.core.errors import BadArgument, ProfkitError, ToolMissing
from profkit.store.store import Store

SQL_TIMEOUT_S = 60.0  # `profkit sql`'s defaults
SQL_MEMORY_MB = 2048
SQL_MAX_ROWS = 10_000  # an agent's context is the limit here, not the database
INSTRUCTIONS = (
    "profkit's database of GPU profiles (Nsight Systems timelines, Nsight Compute counters). Start with "
    "list_runs; then advise (what to fix first), classify (each kernel's bottleneck label), phases, compare "
    "(before/after of two runs or RUN:VARIANT selectors), hotspots (source lines by warp stalls, where the "
    "Nsight Compute report has source counters), or sql for anything else (views: runs, kernels, counters, "
    "classifications, rules, advice, phases; read-only)."
)


def _json(value) -> str:
    return json.dumps(_finite(value), indent=1, default=str, allow_nan=False, ensure_ascii=False)


def _finite(v):
    """NaN and infinities as null: JSON has no such numbers."""
    if isinstance(v, float) and (v != v or v in (float("inf"), float("-inf"))):
        return None
    if isinstance(v, dict):
        return {k: _finite(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_finite(x) for x in v]
    return v


class Tools:
    """The tools' logic over one database path, callable without MCP (the tests call both)."""

    def __init__(self, db: str | os.PathLike):
        self.db = str(db)

    def _store(self) -> Store:
        return Store(self.db, readonly=True)

    def list_runs(self) -> list[dict]:
        from profkit.analyses import summary

        with self._store() as s:
            rows = summary.runs(s)
            for r in rows:
                r["meta"] = s.run_meta(r["run"])
        return rows

    def sql(self, query: str, max_rows: int = 1000, timeout_s: float = SQL_TIMEOUT_S) -> dict:
        from profkit.store.query import Query

        if not 1 <= max_rows <= SQL_MAX_ROWS:
            raise BadArgument(f"max_rows {max_rows}: between 1 and {SQL_MAX_ROWS}")
        if not 0 < timeout_s <= SQL_TIMEOUT_S * 10:
            raise BadArgument(f"timeout_s {timeout_s}: above 0, at most {SQL_TIMEOUT_S * 10:g}")
        rows: list[list[Any]] = []
        truncated = False
        with Query(self.db, query, timeout=timeout_s, memory_mb=SQL_MEMORY_MB) as r:
            for row in r.rows():
                if len(rows) == max_rows:
                    truncated = True
                    break
                rows.append([x.hex() if isinstance(x, bytes) else x for x in row])
            columns = r.columns
        return {"columns": columns, "rows": rows, "truncated": truncated}

    def classify(self, run: str | None = None, per_launch: bool = False, limit: int = 200) -> dict:
        from profkit.analyses.classify import label_rows

        with self._store() as s:
            run = s.require_run(run)
            rows = label_rows(s, run)
            dur = {
                r["kernel_id"]: r["duration_ns"] or 0
                for r in s.query("SELECT kernel_id, duration_ns, short_name FROM kernels WHERE run = ?", (run,))
            }
        if per_launch:
            got = [{k: r[k] for k in ("kernel_id", "nvtx_path", "kernel_name", "label", "reason")} for r in rows]
            return {"run": run, "launches": len(got), "rows": got[:limit], "truncated": len(got) > limit}
        groups: dict = defaultdict(lambda: {"launches": 0, "gpu_us": 0.0, "example_reason": None})
        for r in rows:
            g = groups[r["nvtx_path"], r["kernel_name"], r["label"]]
            g["launches"] += 1
            g["gpu_us"] += dur.get(r["kernel_id"], 0) / 1e3
            g["example_reason"] = g["example_reason"] or r["reason"]
        out = sorted(
            ({"nvtx_path": p, "kernel_name": k, "label": lab, **v} for (p, k, lab), v in groups.items()),
            key=lambda x: -x["gpu_us"],
        )
        return {"run": run, "launches": len(rows), "groups": out[:limit], "truncated": len(out) > limit}

    def advise(self, run: str | None = None, scope: str | None = None, phase: str | None = None) -> dict:
        from profkit.analyses.advise import advise

        with self._store() as s:
            return advise(s, run, scope, phase=phase).as_dict()

    def compare(self, before: str, after: str, by: str = "gpu") -> list[dict]:
        from profkit.analyses.compare import rows

        if by not in ("gpu", "host"):
            raise BadArgument(f"by {by!r}: gpu or host")
        with self._store() as s:
            return rows(s, before, after, by)

    def phases(self, run: str | None = None) -> dict:
        from profkit.analyses import phases

        with self._store() as s:
            run = s.require_run(run)
            got = phases.of_run(s, run)
            return {"run": run, "note": got.note, "phases": phases.rows(got)}

    def hotspots(self, run: str | None = None, kernel: str | None = None, top: int = 10) -> dict:
        from profkit.analyses import hotspots

        with self._store() as s:
            return hotspots.report(s, run, kernel, top).as_dict()


def server(db: str | os.PathLike):
    """The MCP server of one database (MCPServer of the `mcp` package), tools registered."""
    try:
        from mcp.server.mcpserver import MCPServer
        from mcp.server.mcpserver.exceptions import ToolError
        from mcp.types import ToolAnnotations
    except ImportError:
        raise ToolMissing("profkit mcp needs the MCP SDK: pip install 'profkit[mcp]' (or pip install mcp)") from None
    from profkit import __version__

    if not Path(db).is_file():
        raise BadArgument(f"{db}: no such database (profkit ingest FILE... --db {db} makes one)")
    with Store(db, readonly=True):  # a file that is no profkit database fails here, before a client connects
        pass
    t = Tools(db)
    srv = MCPServer("profkit", instructions=INSTRUCTIONS, version=__version__, log_level="WARNING")
    ro = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)

    def tool(fn):
        return srv.tool(annotations=ro, structured_output=False)(fn)

    def answer(call):
        try:
            return _json(call())
        except ProfkitError as e:  # one line, as the CLI prints it; MCP marks the result an error
            raise ToolError(str(e)) from None

    @tool
    def list_runs() -> str:
        """The runs in the database: GPU, report files, kernel launches, NVTX ranges, counters, capture metadata."""
        return answer(t.list_runs)

    @tool
    def sql(query: str, max_rows: int = 1000, timeout_s: float = SQL_TIMEOUT_S) -> str:
        """Run one read-only SQLite query (views: runs, kernels, counters, classifications, rules, advice, phases,
        sass, source_lines; see docs/schema.md). Writes, ATTACH and PRAGMA changes are refused; the query stops
        after timeout_s seconds. Answers {columns, rows, truncated} (at most max_rows rows)."""
        return answer(lambda: t.sql(query, max_rows, timeout_s))

    @tool
    def classify(run: str | None = None, per_launch: bool = False, limit: int = 200) -> str:
        """Label each kernel launch of a run (dram, launch_overhead, occupancy, tensor_core, compute, latency,
        communication, unknown) with its reason; grouped by NVTX path, kernel and label, most GPU time first
        (per_launch: one row per launch). run: default the newest."""
        return answer(lambda: t.classify(run, per_launch, limit))

    @tool
    def advise(run: str | None = None, scope: str | None = None, phase: str | None = None) -> str:
        """What to fix first in a run: items ranked by the GPU time they could recover, each with its evidence and
        next step. scope: an NVTX path to advise under; phase: 'all', or a phase name (default: the steady state)."""
        return answer(lambda: t.advise(run, scope, phase))

    @tool
    def compare(before: str, after: str, by: str = "gpu") -> str:
        """Before vs after per NVTX range (each RUN or RUN:VARIANT): time per call, speed-up with its noise band,
        labels, % of roofline and a verdict (supported, caveated, rejected). by: 'gpu' or 'host' time per call."""
        return answer(lambda: t.compare(before, after, by))

    @tool
    def phases(run: str | None = None) -> str:
        """A run's phases (start-up, compile/autotune, warm-up, steps, later phases) with their GPU windows."""
        return answer(lambda: t.phases(run))

    @tool
    def hotspots(run: str | None = None, kernel: str | None = None, top: int = 10) -> str:
        """A kernel's source lines ranked by sampled warp stalls (from Nsight Compute source counters), each with
        its stall reasons, executed instructions and a one-line reading. kernel: a substring of its name."""
        return answer(lambda: t.hotspots(run, kernel, top))

    return srv


def serve(db: str | os.PathLike) -> None:
    """Serve the database over stdin/stdout until the client closes them."""
    server(db).run("stdio")
