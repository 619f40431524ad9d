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
    launches starting in it (a phase, profkit.analyses.phases.selected). Summed as columns;
    the SQL over the kernels view (_kernels_sql) where a duration is not an integer or the
    sums leave a double's exact integers."""
    run = store.require_run(run)
    got = _kernels_columns(store, run, top, window)
    return _kernels_sql(store, run, top, window) if got is None else got


def _kernels_sql(store: Store, run: str, top: int, window: tuple[int, int] | None) -> list[dict]:
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


def _kernels_columns(store: Store, run: str, top: int, window: tuple[int, int] | None) -> list[dict] | None:
    """_kernels_sql's rows from the launches as columns: the kernels view's path of each launch
    (its lead thread's where it inherited one, its own where launch_nvtx holds one, else its
    path's), its short name, duration and source; the groups in GROUP BY's order (NULL first,
    then by bytes), most time first, ties in that order (as SQLite's sort leaves them)."""
    import numpy as np

    from profkit.core import columns

    c = store.conn
    where = "" if window is None else f" AND start_ns >= {int(window[0])} AND start_ns < {int(window[1])}"
    (kid, path_id, short_id, dur, flags), (src, sources) = store.int_columns(
        "SELECT id, coalesce(path_id, -1), coalesce(short_id, -1), coalesce(duration_ns, 0),"
        " (duration_ns IS NOT NULL) + 2 * (typeof(duration_ns) NOT IN ('integer', 'null')) + 4 * (source IS NULL),"
        f" CAST(coalesce(source, '') AS BLOB) FROM launch_row WHERE run = ? AND timeline_id IS NULL{where}",
        (run,),
        5,
        blob=True,
    )
    if (flags & 2).any():
        return None
    has = (flags & 1) != 0
    total = int(dur[has].sum()) if has.any() else None
    if total is not None and int(np.abs(dur[has]).sum()) >= 1 << 53:
        return None  # (past a double's exact integers SQLite's avg() rounds as it adds)
    # each launch's path text, as the view gives it
    texts: dict = {None: 0}
    path_text = dict(c.execute("SELECT id, path FROM nvtx_path"))
    u, inv = columns.unique_inverse(path_id)
    code = np.array([texts.setdefault(path_text.get(int(i)), len(texts)) for i in u.tolist()], dtype=np.int64)[inv]
    own = c.execute(
        "SELECT o.launch_id, o.nvtx_path FROM launch_nvtx o JOIN launch_row l ON l.id = o.launch_id"
        " WHERE l.run = ? AND l.timeline_id IS NULL AND o.launch_id NOT IN (SELECT launch_id FROM launch_inherit)",
        (run,),
    ).fetchall()
    heir = c.execute(
        "SELECT i.launch_id, p.path FROM launch_inherit i JOIN launch_row l ON l.id = i.launch_id"
        " LEFT JOIN nvtx_path p ON p.id = i.path_id WHERE l.run = ? AND l.timeline_id IS NULL",
        (run,),
    ).fetchall()
    if own or heir:
        order = np.argsort(kid, kind="stable")
        ids = np.array([r[0] for r in own + heir], dtype=np.int64)
        at = np.minimum(np.searchsorted(kid[order], ids), max(len(kid) - 1, 0))
        for (lid, text), i in zip(own + heir, order[at].tolist() if len(kid) else []):
            if kid[i] == lid:
                code[i] = texts.setdefault(text, len(texts))
    names = {None: 0}
    name_of = dict(c.execute("SELECT id, name FROM launch_name"))
    u, inv = columns.unique_inverse(short_id)
    short = np.array([names.setdefault(name_of.get(int(i)), len(names)) for i in u.tolist()], dtype=np.int64)[inv]
    # the groups in GROUP BY's order: NULL first, then texts by their bytes (str order is UTF-8's)
    rank_path = _ranks(texts)
    rank_name = _ranks(names)
    key = rank_path[code] * len(names) + rank_name[short]
    groups, first, g = np.unique(key, return_index=True, return_inverse=True)
    g = g.reshape(-1)
    n = len(groups)
    launches = np.bincount(g, minlength=n)
    counted = np.bincount(g, weights=has, minlength=n).astype(np.int64)
    sums = np.zeros(n, dtype=np.int64)
    np.add.at(sums, g[has], dur[has])
    # min(source): the least by bytes of each group's non-NULL sources
    by_bytes = np.argsort(np.array(sources, dtype=object), kind="stable") if sources else np.zeros(0, dtype=np.int64)
    src_rank = np.empty(len(sources), dtype=np.int64)
    src_rank[by_bytes] = np.arange(len(sources))
    r = np.where((flags & 4) != 0, len(sources), src_rank[src] if len(sources) else 0)
    least = np.full(n, len(sources), dtype=np.int64)
    np.minimum.at(least, g, r)
    path_texts, name_texts = list(texts), list(names)
    rows = []
    for k in range(n):
        i = int(first[k])
        s = int(sums[k]) if counted[k] else None
        rows.append(
            {
                "nvtx_path": path_texts[int(code[i])] or "(outside any NVTX range)",
                "short_name": name_texts[int(short[i])],
                "launches": int(launches[k]),
                "total_us": None if s is None else s / 1e3,
                "mean_us": None if s is None else float(s) / int(counted[k]) / 1e3,
                "pct": None if s is None or not total else 100.0 * s / total,
                "source": None if least[k] == len(sources) else sources[int(by_bytes[least[k]])].decode(),
            }
        )
    # most time first, no time last (stable: ties keep their order)
    ranked = sorted(range(n), key=lambda k: (not counted[k], -int(sums[k])))
    return [rows[k] for k in ranked[: max(top, 0)]]


def _ranks(texts: dict):
    """Each code of `texts` (text -> code, None first) -> its place in SQLite's BINARY order."""
    import numpy as np

    order = sorted(texts, key=lambda t: (t is not None, t or ""))
    out = np.empty(len(texts), dtype=np.int64)
    for place, t in enumerate(order):
        out[texts[t]] = place
    return out


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
