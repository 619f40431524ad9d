"""Analyses of a many-rank run kept as a Parquet dataset (`profkit export --parquet`), in SQL that
runs unchanged on DuckDB (embedded, here) and on Spark SQL (a cluster).

The dataset is the export's layout, partitioned by run and rank:

    DIR/kernels/run=<run>/rank=<rank>/part-0.parquet
    DIR/nvtx_range/run=<run>/rank=<rank>/part-0.parquet

Only the views are engine-specific (Engine.views: DuckDB's read_parquet, Spark's `USING
parquet`); every analysis is one SQL text of this module, run as it is by both. The text keeps
to what both dialects share: CTEs, window functions with explicit frames, CASE instead of
FILTER, regexp_extract (RE2 and Java regexes agree on the step pattern, written without
backslashes, which Spark's string literals would eat), CREATE TEMPORARY VIEW.

What each computes, per run:

- rank_step: per rank and step (the NVTX range whose text matches the step pattern and holds
  the kernel's launch call, as profkit ranks assigns them), the union lengths of compute, NCCL
  and all kernels (gaps-and-islands over start order, so concurrent kernels count once),
  hidden (overlapped) NCCL time, idle time in the step's window, and wait_ns: the rank's NCCL
  time over the quickest rank's in that step (a collective lasts until the last rank arrives).
  A rank without step ranges has one step 'all'.
- stragglers: per step, the rank that waited least (the others waited for it); the run's
  slowest rank is the one slowest in most steps (ties: the least total wait).
- kernels: the kernels by total GPU time over all ranks.
- classify: timeline-level labels (communication for NCCL, launch_overhead by classify's
  RULES thresholds, else unknown: counters are per-kernel ncu work that a fleet run does not
  carry), counted per rank.
- advise: per rank, where its step time went and the largest recoverable part.

DuckDB runs with a memory limit (default 1 GB) and a spill directory: its operators stream
Parquet and spill, so memory stays bounded at any number of ranks.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from profkit.analyses.classify import RULES
from profkit.analyses.ranks import STEP_PATTERN
from profkit.core.errors import BadArgument, BadInput, ToolMissing

TABLES = ("kernels", "nvtx_range")  # the views of the export the analyses read

_STEP_RX = STEP_PATTERN.replace(r"\d", "[0-9]")  # no backslash: Spark SQL literals unescape them

RANK_STEP_SQL = f"""
CREATE TEMPORARY VIEW rank_step AS
WITH steps AS (
  SELECT run, rank, text AS step, start_ns, end_ns FROM nvtx_range
  WHERE text IS NOT NULL AND start_ns IS NOT NULL AND end_ns IS NOT NULL
    AND regexp_extract(lower(text), '{_STEP_RX}', 0) <> ''
),
stepped AS (
  SELECT run, rank, count(*) AS n FROM steps GROUP BY run, rank
),
k AS (
  SELECT k.run, k.rank, coalesce(s.step, 'all') AS step, k.start_ns, k.end_ns,
         CASE WHEN lower(k.short_name) LIKE 'nccl%' OR lower(k.kernel_name) LIKE 'nccl%' THEN 1 ELSE 0 END AS comm
  FROM kernels k
  LEFT JOIN steps s ON k.run = s.run AND k.rank = s.rank
       AND coalesce(k.api_start_ns, k.start_ns) >= s.start_ns AND coalesce(k.api_start_ns, k.start_ns) <= s.end_ns
  LEFT JOIN stepped st ON k.run = st.run AND k.rank = st.rank
  WHERE k.source <> 'ncu' AND k.start_ns IS NOT NULL AND (s.step IS NOT NULL OR st.n IS NULL)
),
-- kind 0: compute, 1: NCCL, 2: every kernel (for idle and overlap)
kinds AS (
  SELECT run, rank, step, comm AS kind, start_ns, end_ns FROM k
  UNION ALL
  SELECT run, rank, step, 2 AS kind, start_ns, end_ns FROM k
),
ordered AS (
  SELECT run, rank, step, kind, start_ns, end_ns,
         max(end_ns) OVER (PARTITION BY run, rank, step, kind ORDER BY start_ns, end_ns
                           ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS reach
  FROM kinds
),
islands AS (
  SELECT run, rank, step, kind, start_ns, end_ns,
         sum(CASE WHEN reach IS NULL OR start_ns > reach THEN 1 ELSE 0 END)
           OVER (PARTITION BY run, rank, step, kind ORDER BY start_ns, end_ns
                 ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS island
  FROM ordered
),
merged AS (
  SELECT run, rank, step, kind, max(end_ns) - min(start_ns) AS len
  FROM islands GROUP BY run, rank, step, kind, island
),
lens AS (
  SELECT run, rank, step,
         sum(CASE WHEN kind = 0 THEN len ELSE 0 END) AS compute_ns,
         sum(CASE WHEN kind = 1 THEN len ELSE 0 END) AS comm_ns,
         sum(CASE WHEN kind = 2 THEN len ELSE 0 END) AS busy_ns
  FROM merged GROUP BY run, rank, step
),
counts AS (
  SELECT run, rank, step, count(*) AS kernels, sum(comm) AS comm_kernels,
         min(start_ns) AS start_ns, max(end_ns) AS end_ns
  FROM k GROUP BY run, rank, step
),
joined AS (
  SELECT c.run, c.rank, c.step, c.kernels, c.comm_kernels, c.start_ns, c.end_ns,
         c.end_ns - c.start_ns AS window_ns, l.compute_ns, l.comm_ns,
         l.compute_ns + l.comm_ns - l.busy_ns AS overlap_ns,
         l.busy_ns - l.compute_ns AS exposed_comm_ns,
         c.end_ns - c.start_ns - l.busy_ns AS idle_ns
  FROM counts c JOIN lens l ON c.run = l.run AND c.rank = l.rank AND c.step = l.step
)
SELECT joined.*, comm_ns - min(comm_ns) OVER (PARTITION BY run, step) AS wait_ns,
       min(start_ns) OVER (PARTITION BY run, step) AS step_first_ns
FROM joined
"""

STRAGGLERS_SQL = """
WITH ranked AS (
  SELECT run, step, rank, wait_ns, step_first_ns,
         count(*) OVER (PARTITION BY run, step) AS ranks,
         max(wait_ns) OVER (PARTITION BY run, step) AS wait_skew_ns,
         sum(comm_ns) OVER (PARTITION BY run, step) AS step_comm_ns,
         row_number() OVER (PARTITION BY run, step
                            ORDER BY wait_ns, compute_ns + idle_ns DESC, rank) AS place
  FROM rank_step
)
SELECT run, step, ranks, CASE WHEN ranks > 1 AND step_comm_ns > 0 THEN rank END AS slowest_rank, wait_skew_ns
FROM ranked WHERE place = 1
ORDER BY run, step_first_ns, step
"""

PER_RANK_SQL = """
WITH slow AS (
  SELECT run, rank, count(*) AS slowest_in_steps FROM (
    SELECT run, step, rank, count(*) OVER (PARTITION BY run, step) AS ranks,
           sum(comm_ns) OVER (PARTITION BY run, step) AS step_comm_ns,
           row_number() OVER (PARTITION BY run, step ORDER BY wait_ns, compute_ns + idle_ns DESC, rank) AS place
    FROM rank_step) r
  WHERE place = 1 AND ranks > 1 AND step_comm_ns > 0
  GROUP BY run, rank
)
SELECT s.run, s.rank, count(*) AS steps, sum(kernels) AS kernels, sum(comm_kernels) AS comm_kernels,
       sum(window_ns) AS window_ns, sum(compute_ns) AS compute_ns, sum(comm_ns) AS comm_ns,
       sum(overlap_ns) AS overlap_ns, sum(exposed_comm_ns) AS exposed_comm_ns, sum(idle_ns) AS idle_ns,
       sum(wait_ns) AS wait_ns, coalesce(max(w.slowest_in_steps), 0) AS slowest_in_steps
FROM rank_step s LEFT JOIN slow w ON s.run = w.run AND s.rank = w.rank
GROUP BY s.run, s.rank
ORDER BY s.run, s.rank
"""

KERNELS_SQL = """
SELECT run, short_name, count(*) AS launches, count(DISTINCT rank) AS ranks, sum(duration_ns) AS total_ns,
       avg(duration_ns) AS mean_ns, min(duration_ns) AS min_ns, max(duration_ns) AS max_ns
FROM kernels WHERE source <> 'ncu' AND duration_ns IS NOT NULL
GROUP BY run, short_name
ORDER BY run, total_ns DESC, short_name
"""

_LO = RULES["launch_overhead"]["threshold"]["duration_ns"]

CLASSIFY_SQL = f"""
WITH t AS (
  SELECT run, rank, short_name, kernel_name, duration_ns, api_end_ns - api_start_ns AS api_ns,
         start_ns - lag(end_ns) OVER (PARTITION BY run, rank, device, stream ORDER BY start_ns) AS gap_ns
  FROM kernels WHERE source <> 'ncu' AND start_ns IS NOT NULL
),
l AS (
  SELECT run, rank, duration_ns,
         CASE WHEN lower(short_name) LIKE 'nccl%' OR lower(kernel_name) LIKE 'nccl%' THEN 'communication'
              WHEN duration_ns < {_LO} AND (api_ns >= duration_ns OR gap_ns >= duration_ns) THEN 'launch_overhead'
              ELSE 'unknown' END AS label
  FROM t
)
SELECT run, rank, label, count(*) AS kernels, sum(duration_ns) AS total_ns
FROM l GROUP BY run, rank, label
ORDER BY run, rank, total_ns DESC, label
"""

ANALYSES = {"stragglers": STRAGGLERS_SQL, "per_rank": PER_RANK_SQL, "kernels": KERNELS_SQL, "classify": CLASSIFY_SQL}


class Engine:
    """One SQL engine over the dataset: views(dir) registers TABLES, sql(text) -> list of dicts."""

    def views(self, root: Path) -> None:
        raise NotImplementedError

    def sql(self, text: str) -> list[dict]:
        raise NotImplementedError

    def close(self) -> None:
        pass


class DuckDB(Engine):
    def __init__(self, memory_limit: str = "1GB", threads: int | None = None, spill: str | None = None):
        try:
            import duckdb
        except ImportError:
            raise ToolMissing("fleet analyses need DuckDB: pip install duckdb") from None
        self.conn = duckdb.connect(":memory:")
        self.conn.execute(f"SET memory_limit = '{memory_limit}'")
        self.conn.execute("SET preserve_insertion_order = false")  # lets operators stream and spill
        if threads:
            self.conn.execute(f"SET threads = {int(threads)}")
        if spill:
            self.conn.execute(f"SET temp_directory = '{_quote(spill)}'")

    def views(self, root: Path) -> None:
        for t in TABLES:
            files = _quote(str(root / t / "*" / "*" / "*.parquet"))
            self.conn.execute(
                f"CREATE TEMPORARY VIEW {t} AS SELECT * FROM read_parquet('{files}', "
                "hive_partitioning = true, union_by_name = true, "
                "hive_types = {'run': VARCHAR, 'rank': BIGINT})"
            )

    def sql(self, text: str) -> list[dict]:
        cur = self.conn.execute(text)
        if cur.description is None:
            return []
        cols = [d[0] for d in cur.description]
        return [dict(zip(cols, r)) for r in cur.fetchall()]

    def close(self) -> None:
        self.conn.close()


class Spark(Engine):
    """pyspark in local mode (or the session given): the same SQL text as DuckDB."""

    def __init__(self, session=None, cores: int = 2, memory: str = "1g"):
        if session is None:
            try:
                from pyspark.sql import SparkSession
            except ImportError:
                raise ToolMissing("the Spark engine needs pyspark: pip install pyspark (and Java 17)") from None
            session = (
                SparkSession.builder.master(f"local[{cores}]")
                .appName("profkit-fleet")
                .config("spark.driver.memory", memory)
                .config("spark.ui.enabled", "false")
                .config("spark.ui.showConsoleProgress", "false")
                .config("spark.sql.shuffle.partitions", str(max(2, cores * 2)))
                .getOrCreate()
            )
            session.sparkContext.setLogLevel("ERROR")
        self.spark = session

    def views(self, root: Path) -> None:
        for t in TABLES:
            where = _quote(str(root / t))
            self.spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW {t} USING parquet OPTIONS (path '{where}')")

    def sql(self, text: str) -> list[dict]:
        head = text.lstrip().upper()
        if head.startswith("CREATE TEMPORARY VIEW"):  # Spark refuses to replace one silently
            text = text.replace("CREATE TEMPORARY VIEW", "CREATE OR REPLACE TEMPORARY VIEW", 1)
        rows = [r.asDict() for r in self.spark.sql(text).collect()]
        if head.startswith("CREATE TEMPORARY VIEW RANK_STEP"):
            # every analysis reads it: computed once (Spark would replan it per query; DuckDB's
            # queries are quick enough to recompute it)
            self.spark.sql("CACHE TABLE rank_step")
        return rows

    def close(self) -> None:
        self.spark.stop()


def _quote(s: str) -> str:
    return s.replace("'", "''")


@dataclass
class Fleet:
    runs: list[str]
    per_rank_step: list[dict]
    per_step: list[dict]
    per_rank: list[dict]
    slowest_rank: dict  # run -> rank (None: no straggler to name)
    notes: list[str]


def open_dataset(root, engine: Engine | None = None) -> Engine:
    """`engine` (default DuckDB) with the dataset's views registered, refusing a folder that is
    not an export with kernels."""
    root = Path(root)
    if not (root / "kernels").is_dir() or not any((root / "kernels").glob("*/*/*.parquet")):
        raise BadInput(root, "not a profkit Parquet export with kernels (profkit export --parquet DIR)")
    if not (root / "nvtx_range").is_dir():
        raise BadInput(root, "the export has no nvtx_range view (export it again with this profkit)")
    engine = engine or DuckDB()
    engine.views(root)
    engine.sql(RANK_STEP_SQL)
    return engine


def ranks(engine: Engine, run: str | None = None) -> Fleet:
    """Stragglers and per-rank time over the dataset (open_dataset), every run or `run`."""
    per_step = engine.sql(STRAGGLERS_SQL)
    per_rank = engine.sql(PER_RANK_SQL)
    runs = sorted({r["run"] for r in per_rank})
    if run is not None:
        if run not in runs:
            raise BadArgument(f"no run named {run!r} in the dataset; runs: {', '.join(runs) or '(none)'}")
        runs = [run]
        per_step = [r for r in per_step if r["run"] == run]
        per_rank = [r for r in per_rank if r["run"] == run]
    slowest, notes = {}, []
    for r in runs:
        mine = [x for x in per_rank if x["run"] == r]
        counted = [x for x in mine if x["slowest_in_steps"]]
        slowest[r] = max(counted, key=lambda x: (x["slowest_in_steps"], -x["wait_ns"]))["rank"] if counted else None
        if len(mine) == 1:
            notes.append(f"run {r}: one rank only, no straggler to find")
    return Fleet(runs, [], per_step, per_rank, slowest, notes)


def rank_steps(engine: Engine, run: str) -> list[dict]:
    return engine.sql(f"SELECT * FROM rank_step WHERE run = '{_quote(run)}' ORDER BY step_first_ns, step, rank")


def kernels(engine: Engine, run: str | None = None, top: int = 20) -> list[dict]:
    rows = engine.sql(KERNELS_SQL)
    if run is not None:
        rows = [r for r in rows if r["run"] == run]
    out = []
    per_run: dict[str, int] = {}
    for r in rows:
        per_run[r["run"]] = per_run.get(r["run"], 0) + 1
        if per_run[r["run"]] <= top:
            out.append(r)
    return out


def classify(engine: Engine, run: str | None = None) -> list[dict]:
    return [r for r in engine.sql(CLASSIFY_SQL) if run is None or r["run"] == run]


FIXES = {
    "wait_ns": "waits for other ranks: look at the slowest rank",
    "exposed_comm_beyond_wait_ns": "NCCL time not hidden under compute: overlap it (bucket sizes, async collectives)",
    "idle_ns": "GPU idle inside the step: host-bound or serialised launches",
    "launch_overhead_ns": "launch-overhead kernels: fuse them or capture a CUDA graph",
}


def advise(engine: Engine, run: str | None = None) -> list[dict]:
    """Per rank: its step time, and the largest of what it could recover: time waiting for other
    ranks, NCCL time not hidden under compute (beyond the wait), idle GPU time, launch-overhead
    kernels."""
    f = ranks(engine, run)
    lo = {(r["run"], r["rank"]): r["total_ns"] for r in classify(engine, run) if r["label"] == "launch_overhead"}
    out = []
    for r in f.per_rank:
        window = r["window_ns"] or 0
        parts = {
            "wait_ns": r["wait_ns"],
            "exposed_comm_beyond_wait_ns": max(0, r["exposed_comm_ns"] - r["wait_ns"]),
            "idle_ns": r["idle_ns"],
            "launch_overhead_ns": lo.get((r["run"], r["rank"]), 0),
        }
        what, ns = max(parts.items(), key=lambda kv: kv[1])
        out.append(
            {
                "run": r["run"],
                "rank": r["rank"],
                "steps": r["steps"],
                "window_ns": window,
                **parts,
                "first_fix": FIXES[what] if ns > 0 else None,
                "recoverable_ns": ns,
                "share": ns / window if window else None,
                "slowest": f.slowest_rank.get(r["run"]) == r["rank"],
            }
        )
    return out
