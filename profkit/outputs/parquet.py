"""profkit export --parquet: the user-facing views as Parquet, for engines that run at fleet
scale (DuckDB, Spark, Trino, pandas) and never need profkit to read them.

    DIR/runs/run=<run>/part-0.parquet
    DIR/kernels/run=<run>/rank=<rank>/part-0.parquet      (also counters, classifications, rules, advice,
                                                           nvtx_range: the ranges profkit.analyses.fleet reads)

Hive-style partitions: the partition columns live in the folder names, not in the files
(readers rebuild them: DuckDB `hive_partitioning = true`, Spark by default). A NULL rank
(single-process run) is written as `rank=__HIVE_DEFAULT_PARTITION__`, which Hive, Spark and
DuckDB read back as NULL. Values are escaped as URIs (a run named `a/b` becomes `run=a%2Fb`).
Exporting a run again replaces its partitions and leaves the other runs' files alone. A view
with no rows (counters of a timeline-only database, classifications before `profkit classify`,
advice before `profkit advise`, rules of reports without ncu's rule results)
writes no files.
Rows stream out of SQLite in batches, so a million-kernel run needs no million-row table in memory.
"""

from __future__ import annotations

from pathlib import Path

from profkit.core.dbfile import open_readonly
from profkit.core.errors import ProfkitError, ToolMissing
from profkit.store.schema import VIEWS

BATCH_ROWS = 100_000
PARTITIONS = {
    "runs": ("run",),
    "kernels": ("run", "rank"),
    "counters": ("run", "rank"),
    "classifications": ("run", "rank"),
    "rules": ("run", "rank"),
    "advice": ("run",),  # advice's `rank` is the item's place in the list, not a process
    "nvtx_range": ("run", "rank"),
}  # the step ranges the fleet analyses split time by


def _pyarrow():
    try:
        import pyarrow  # noqa: F401
        import pyarrow.dataset  # noqa: F401
    except ImportError:
        raise ToolMissing(
            "Parquet export needs pyarrow: pip install 'profkit[export]' (or pip install pyarrow)"
        ) from None
    import pyarrow as pa
    import pyarrow.dataset as ds

    return pa, ds


def _arrow_types(conn, view: str, pa) -> dict:
    """Column -> Arrow type, from the declared types under the view; an undeclared column
    (an expression) takes the storage class SQLite actually holds."""
    kinds = {"INTEGER": pa.int64(), "REAL": pa.float64(), "TEXT": pa.string()}
    out = {}
    for _, name, decl, *_ in conn.execute(f"PRAGMA table_info({view})"):
        t = kinds.get((decl or "").upper())
        if t is None:
            seen = {r[0] for r in conn.execute(f'SELECT DISTINCT typeof("{name}") FROM {view}')} - {"null"}
            t = pa.float64() if "real" in seen else pa.int64() if seen == {"integer"} else pa.string()
        out[name] = t
    return out


def export_parquet(db: str, out: str | Path, run: str | None = None, views=tuple(PARTITIONS)) -> dict:
    """Write `views` of `run` (default: every run) under `out`. Returns {view: rows written}."""
    pa, ds = _pyarrow()
    out = Path(out)
    from profkit.store.store import Store

    Store(db, readonly=True).close()  # a profkit database (or one line saying what it is instead)
    # our own fixed queries: a read-only file handle is lock enough (open_readonly's
    # authorizer, there for user SQL, also refuses the table_info pragma used here)
    conn = open_readonly(db, check_same_thread=False)  # write_dataset pulls batches from its own thread
    try:
        runs = [r[0] for r in conn.execute("SELECT run FROM runs ORDER BY run")]
        if run is not None and run not in runs:
            raise ProfkitError(f"{db}: no run named {run!r}; runs: {', '.join(runs) or '(none)'}")
        written = {}
        for view in views:
            if view not in VIEWS and view not in PARTITIONS:
                raise ProfkitError(f"no view named {view!r}; views: {', '.join(PARTITIONS)}")
            types = _arrow_types(conn, view, pa)
            schema = pa.schema([(c, t) for c, t in types.items()])
            parts = PARTITIONS[view]
            where, params = ("WHERE run = ?", (run,)) if run is not None else ("", ())
            cur = conn.execute(
                f"SELECT {', '.join(chr(34) + c + chr(34) for c in types)} FROM {view} {where}"
                f" ORDER BY {', '.join(parts)}",
                params,
            )
            count = [0]

            def batches():
                while rows := cur.fetchmany(BATCH_ROWS):
                    count[0] += len(rows)
                    cols = list(zip(*rows))
                    yield pa.RecordBatch.from_arrays(
                        [pa.array(c, type=t) for c, t in zip(cols, schema.types)], schema=schema
                    )

            part_schema = pa.schema([(c, types[c]) for c in parts])
            ds.write_dataset(
                batches(),
                out / view,
                schema=schema,
                format="parquet",
                partitioning=ds.partitioning(part_schema, flavor="hive"),
                basename_template="part-{i}.parquet",
                existing_data_behavior="delete_matching",
                max_rows_per_group=BATCH_ROWS,
            )
            written[view] = count[0]
        return written
    finally:
        conn.close()
