"""Readable summaries of what a database holds: runs, and where each run's GPU time went."""

from __future__ import annotations

from profkit.store.store import Store


def runs(store: Store) -> list[dict]:
    return store.query("""
        SELECT r.run, r.gpu_name, r.created_at,
               (SELECT count(*) FROM report_file f WHERE f.run = r.run) AS files,
               (SELECT count(*) FROM kernels k WHERE k.run = r.run) AS kernels,
               (SELECT count(*) FROM nvtx_range n WHERE n.run = r.run) AS ranges,
               (SELECT count(*) FROM counter c JOIN launch l ON l.id = c.launch_id WHERE l.run = r.run) AS counters
        FROM run r ORDER BY r.created_at, r.run""")


def kernels(store: Store, run: str | None = None, top: int = 20, window: tuple[int, int] | None = None) -> list[dict]:
    """Kernels grouped by NVTX path and name, most total GPU time first; `window`: only the
    launches starting in it (a phase, profkit.analyses.phases.selected)."""
    run = store.require_run(run)
    lo, hi = window if window else (None, None)
    return store.query(
        """
        WITH k AS (SELECT * FROM kernels WHERE run = :run
                   AND (:lo IS NULL OR (start_ns >= :lo AND start_ns < :hi))),
             total AS (SELECT sum(duration_ns) AS t FROM k)
        SELECT coalesce(nvtx_path, '(outside any NVTX range)') AS nvtx_path, short_name, count(*) AS launches,
               sum(duration_ns) / 1e3 AS total_us, avg(duration_ns) / 1e3 AS mean_us,
               100.0 * sum(duration_ns) / (SELECT t FROM total) AS pct, min(source) AS source
        FROM k GROUP BY nvtx_path, short_name
        ORDER BY total_us DESC LIMIT :top""",
        {"run": run, "top": top, "lo": lo, "hi": hi},
    )


def sampling(store: Store, run: str) -> str:
    """How a sampled capture's timeline launches got their counters: measured by ncu, labelled
    from a measured launch of the same kernel and configuration, or none."""
    # measured: the distinct timeline launches ncu rows point at (one pass over the run's rows,
    # not a search of every launch per timeline launch)
    r = store.query(
        """SELECT sum(source != 'ncu' AND timeline_id IS NULL) AS launches,
                              count(DISTINCT timeline_id) AS measured,
                              sum(source != 'ncu' AND timeline_id IS NULL AND sampled_from IS NOT NULL) AS sampled
                       FROM launch_row WHERE run = ?""",
        (run,),
    )[0]
    rest = (r["launches"] or 0) - (r["measured"] or 0) - (r["sampled"] or 0)
    return (
        f"run {run}: {r['launches']:,} timeline launches: {r['measured'] or 0:,} measured by ncu, "
        f"{r['sampled']:,} labelled from a measured launch of the same kernel and configuration (sampled_from), "
        f"{rest:,} without counters (timeline evidence only)"
    )
