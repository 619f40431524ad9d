"""Which kernels a before/after comparison is about, and how before meets after.

A selector is ``RUN`` or ``RUN:VARIANT``. ``RUN`` takes every kernel of the run under an
NVTX range, grouped by its NVTX path. ``RUN:VARIANT`` takes only the paths that hold
VARIANT as one '/'-separated part (a variant such as ``eager`` or ``triton``) and groups
them by the path with that part removed, so that ``rmsnorm/eager/llama8b-t32768`` and
``rmsnorm/triton/llama8b-t32768`` meet on the key ``rmsnorm/llama8b-t32768``.

Both ``profkit compare`` and ``profkit roofline --compare`` pair ranges this way.
"""

from __future__ import annotations

import bisect
import json
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from profkit.core import columns
from profkit.core.errors import BadArgument, NoSuchRun
from profkit.store.store import Store


@dataclass(frozen=True)
class Selector:
    run: str
    component: str | None = None

    def __str__(self) -> str:
        return f"{self.run}:{self.component}" if self.component else self.run


@dataclass
class Group:
    """The kernels of one NVTX path in one selection, in launch order."""

    key: str
    path: str
    kernels: list[dict] = field(default_factory=list)


@dataclass
class Launches:
    """The launches of one NVTX path in one selection as columns, in launch order (what
    compare reads of them; groups() has the same launches as rows)."""

    key: str
    path: str
    kernel_id: np.ndarray
    name: np.ndarray  # kernel name codes: equal codes, equal names
    start: np.ndarray | None  # GPU start and end (None: a launch lacks one)
    end: np.ndarray | None
    duration: np.ndarray  # ns (0 where unknown)
    api_start: np.ndarray | None  # its API call's start (None: a launch lacks one)
    call: np.ndarray  # the range instance holding its launch call (NO_CALL: none known)


NO_CALL = -1  # (range instance ids are row ids: positive)


@dataclass
class Pair:
    key: str
    before: Group | Launches
    after: Group | Launches


def parse(text: str) -> Selector:
    run, sep, component = text.partition(":")
    if not run or (sep and not component):
        raise BadArgument(
            f"bad selector {text!r}: use RUN or RUN:VARIANT (one range name of an NVTX path, e.g. triton)"
        )
    return Selector(run, component or None)


def names(row: dict) -> list:
    """A kernel row's enclosing range names: its structured path (`nvtx_names`), else its
    readable path split at '/' (ambiguous where a name holds '/')."""
    js = row.get("nvtx_names")
    if js:
        return list(_parsed(js))
    return row["nvtx_path"].split("/") if row.get("nvtx_path") else []


@lru_cache(maxsize=1 << 16)
def _parsed(js: str) -> tuple:
    """A path's names, parsed once: a run's launches share a few hundred distinct paths."""
    return tuple(json.loads(js))


def key_of(path, component: str | None) -> str | None:
    """The pairing key of an NVTX path (its names, or the readable path) under a selector's
    component (None: not selected). COMPONENT matches one whole range name, '/' and all."""
    parts = list(path) if isinstance(path, (list, tuple)) else path.split("/")
    if component is None:
        return "/".join("" if p is None else p for p in parts)
    if component not in parts:
        return None
    parts.remove(component)  # the first occurrence: the variant level
    return "/".join("" if p is None else p for p in parts)


_KERNEL_COLUMNS = (
    "kernel_id, kernel_name, short_name, nvtx_range, nvtx_path, start_ns, end_ns, "
    "duration_ns, stream, source, api_start_ns, api_end_ns, nvtx_names, rank, pid, tid, nvtx_tid"
)


def groups(store: Store, sel: Selector) -> dict[str, Group]:
    """The selector's kernels grouped by pairing key (timeline launches; ncu-only runs too).
    Within Store.snapshot the same selector's groups are made once (the claims pair the
    baseline with every other variant): read them, do not change them."""
    return dict(store.remember(("groups", sel), lambda: _groups(store, sel)))


def _groups(store: Store, sel: Selector) -> dict[str, Group]:
    if sel.run not in store.runs():
        raise NoSuchRun(f"no run {sel.run!r} in {store.path}; runs: {', '.join(store.runs()) or 'none'}")
    rows = store.query(
        f"SELECT {_KERNEL_COLUMNS} FROM kernels WHERE run = ? AND nvtx_path IS NOT NULL AND nvtx_path != '' "
        "ORDER BY coalesce(start_ns, 0), kernel_id",
        (sel.run,),
    )
    out: dict[str, Group] = {}
    keys: dict = {}  # a run's launches share a few hundred distinct paths: each one's key once
    held = _instances(store, sel.run)
    for r in rows:
        at = (r["nvtx_names"], r["nvtx_path"])
        key = keys[at] if at in keys else keys.setdefault(at, key_of(names(r), sel.component))
        if key is None:
            continue
        g = out.setdefault(key, Group(key, r["nvtx_path"]))
        g.kernels.append(dict(r, call=_instance_of(held, r)))
    if not out:
        _none_selected(sel, [r["nvtx_path"] for r in rows])
    return out


def _none_selected(sel: Selector, paths: list[str]) -> None:
    """Refuse a selector that selects no launch (`paths`: the run's NVTX paths, launch by launch
    or each once, in launch order)."""
    if not sel.component:
        raise BadArgument(f"{sel}: no kernels under an NVTX range")
    known = variants(paths)
    import difflib

    close = difflib.get_close_matches(sel.component, known, n=1)
    hint = f"did you mean {sel.run}:{close[0]}? " if close else ""
    raise BadArgument(
        f"{sel}: no NVTX path of run {sel.run!r} has a part {sel.component!r}; {hint}"
        f"variants of this run: {', '.join(known) or 'none'}"
    )


def _instances(store: Store, run: str) -> dict:
    """The run's range instances by (path, rank, pid, tid): sorted starts, ends and ids."""
    out: dict = {}
    for e in store.query(
        "SELECT id, names, path, start_ns, end_ns, rank, pid, tid FROM nvtx_range "
        "WHERE run = ? AND start_ns IS NOT NULL AND end_ns IS NOT NULL "
        "ORDER BY start_ns, id",
        (run,),
    ):
        k = (e["names"] or e["path"], e["rank"], e["pid"], e["tid"])
        starts, ends, ids = out.setdefault(k, ([], [], []))
        starts.append(e["start_ns"]), ends.append(e["end_ns"]), ids.append(e["id"])
    return out


def _instance_of(held: dict, row: dict):
    """The id of the instance of the kernel's innermost range whose span holds its launch call
    (None: no launch time, or no such instance). The range is on the thread the path was read
    on (`nvtx_tid`: the lead thread where the launch inherited its ranges)."""
    t = row.get("api_start_ns")
    if t is None:
        return None
    tid = row["nvtx_tid"] if "nvtx_tid" in row else row.get("tid")
    found = held.get((row["nvtx_names"] or row["nvtx_path"], row.get("rank"), row.get("pid"), tid))
    if not found:
        return None
    starts, ends, ids = found
    i = bisect.bisect_right(starts, t) - 1
    return ids[i] if i >= 0 and ends[i] >= t else None


NULL = -(1 << 63)  # a NULL in an integer column read as an array


def launch_groups(store: Store, sel: Selector, read=None) -> dict[str, Launches]:
    """groups() as columns: the same launches under the same keys, in the same order, with the
    same range instance each (a million launches as rows cost gigabytes and minutes). Read from
    the tables the `kernels` view is made of: the view's per-row subqueries cost more than the
    rest of a comparison. `read`: launch_read()'s, started before (else read here)."""
    return dict(store.remember(("launch_groups", sel), lambda: _launch_groups(store, sel, read)))


def launch_read(store: Store, run: str):
    """The run's launches as launch_groups reads them, under way on threads of their own
    (result() is the columns): started while other work is done."""
    n = NULL
    return store.int_columns_by_ids(
        f"""
        SELECT id, name_id, coalesce(path_id, {n}), coalesce(start_ns, {n}), coalesce(end_ns, {n}),
               coalesce(duration_ns, 0), coalesce(api_start_ns, {n}), coalesce(rank, {n}), coalesce(pid, {n}),
               coalesce(tid, {n})
        FROM launch_row WHERE id {{between}} AND +run = ? AND timeline_id IS NULL""",
        (run,),
        10,
        id_bounds(store, "launch_row", run) or (1, 0),
        later=True,
    )


def _launch_groups(store: Store, sel: Selector, read=None) -> dict[str, Launches]:
    if sel.run not in store.runs():
        raise NoSuchRun(f"no run {sel.run!r} in {store.path}; runs: {', '.join(store.runs()) or 'none'}")
    c = store.conn
    n = NULL
    kid, name, path_id, start, end, dur, api, rank, pid, tid = (read or launch_read(store, sel.run)).result()[0]
    path_id, tid = path_id.copy(), tid.copy()
    # the `kernels` view's paths: a launch that inherited its lead thread's ranges is read under
    # that path and thread; a launch with its own path text (launch_nvtx) keeps its names' row.
    # (CROSS JOIN: SQLite walks the few rows of these tables, not every launch of the run)
    inherit = columns.ints(
        c,
        f"SELECT i.launch_id, i.path_id, coalesce(i.tid, {n}) FROM launch_inherit i "
        "CROSS JOIN launch_row l ON l.id = i.launch_id WHERE l.run = ? AND l.timeline_id IS NULL",
        (sel.run,),
        3,
    )
    order = np.argsort(kid) if len(inherit) else np.zeros(0, dtype=np.intp)
    at = order[np.searchsorted(kid, inherit[:, 0], sorter=order)] if len(inherit) else np.zeros(0, dtype=np.int64)
    path_id[at], tid[at] = inherit[:, 1], inherit[:, 2]
    own = dict(
        c.execute(
            "SELECT o.launch_id, o.nvtx_path FROM launch_nvtx o CROSS JOIN launch_row l ON l.id = o.launch_id "
            "WHERE l.run = ? AND l.timeline_id IS NULL",
            (sel.run,),
        )
    )
    for i in set(at.tolist()):
        own.pop(int(kid[i]), None)
    paths = {p: (names, path) for p, names, path in c.execute("SELECT id, names, path FROM nvtx_path")}
    # one code per distinct (names, path text) a launch is read under
    combos: dict[tuple, int] = {}
    code_of_path = np.full(max(paths, default=0) + 2, -1, dtype=np.int64)
    for p, (names, path) in paths.items():
        code_of_path[p] = combos.setdefault((names, path), len(combos))
    combo = code_of_path[np.where(path_id == n, -1, path_id)]
    if own:
        order = np.argsort(kid)
        where_own = order[np.searchsorted(kid, np.fromiter(own, dtype=np.int64), sorter=order)]
        for i, text in zip(where_own.tolist(), own.values()):
            names = paths[int(path_id[i])][0] if path_id[i] != n else None
            combo[i] = combos.setdefault((names, text), len(combos))
    info = list(combos)  # code -> (names, path)
    keep = np.array([bool(path) for _, path in info] + [False], dtype=bool)[combo]
    chosen = np.flatnonzero(keep)
    # by start (0 where unknown), then id: a stable sort of rows in id order (as SQLite gave them)
    if not (np.diff(kid[chosen]) > 0).all():
        chosen = chosen[np.argsort(kid[chosen], kind="stable")]
    row = chosen[np.argsort(np.where(start[chosen] == n, 0, start[chosen]), kind="stable")]
    thread = [rank[row], pid[row], tid[row]]
    call = _instances_of(store, sel.run, info, combo[row], api[row], thread)
    keys: dict[int, str | None] = {}
    for code in dict.fromkeys(combo[row].tolist()):
        names, path = info[code]
        keys[code] = key_of(list(_parsed(names)) if names else path.split("/"), sel.component)
    # a group per key, in the order of its first launch; launches in launch order within it
    group_of = {k: i for i, k in enumerate(dict.fromkeys(k for k in keys.values() if k is not None))}
    if not group_of:
        _none_selected(sel, [info[code][1] for code in keys])
    lookup = np.full(len(info) + 1, -1, dtype=np.int64)
    for code, k in keys.items():
        if k is not None:
            lookup[code] = group_of[k]
    g = lookup[combo[row]]
    mine = np.flatnonzero(g >= 0)
    by = mine[np.argsort(g[mine], kind="stable")]
    bounds = np.searchsorted(g[by], np.arange(len(group_of) + 1))
    out: dict[str, Launches] = {}
    for i, key in enumerate(group_of):
        ix = by[bounds[i] : bounds[i + 1]]
        r = row[ix]
        s_, e_, a_ = start[r], end[r], api[r]
        timed = not ((s_ == n).any() or (e_ == n).any())
        out[key] = Launches(
            key,
            info[int(combo[r[0]])][1],
            kid[r],
            name[r],
            s_ if timed else None,
            e_ if timed else None,
            dur[r],
            None if (a_ == n).any() else a_,
            call[ix],
        )
    return out


def id_bounds(store: Store, table: str, run: str) -> tuple[int, int] | None:
    """The first and last row id that the run's report files wrote into `table` (launch_row,
    nvtx_event), read from their file_id index in a few steps (None: no rows)."""
    lo, hi = store.conn.execute(
        f"SELECT min(a), max(b) FROM (SELECT (SELECT min(id) FROM {table} WHERE file_id = f.id) AS a, "
        f"(SELECT max(id) FROM {table} WHERE file_id = f.id) AS b FROM report_file f WHERE f.run = ?)",
        (run,),
    ).fetchone()
    return None if lo is None else (int(lo), int(hi))


def id_span(store: Store, table: str, run: str) -> tuple[str, int]:
    """SQL limiting `table` to the span of row ids its run's report files wrote (id_bounds),
    and the span's length (a bound on the rows): a run's rows are read in one stretch of the
    table, not by a walk of the run's index or a scan of every run's rows."""
    got = id_bounds(store, table, run)
    return ("0", 0) if got is None else (f"id BETWEEN {got[0]} AND {got[1]}", got[1] - got[0] + 1)


def _instances_of(store: Store, run: str, info: list, combo, api, thread: list, chunk: int = 1 << 21) -> np.ndarray:
    """_instance_of for launches as columns: the id of the latest instance of its path (names,
    else text) on its thread (rank, pid, tid) that started at or before its launch call and
    had not ended (NO_CALL: none, or no launch call time). The run's ranges are read a stretch
    of about `chunk` row ids at a time, only those of a path some launch has (a launch's
    innermost range: a fraction of the run's nested ranges), and matched to the launches in
    batches of about `chunk` ranges, each batch's latest instance kept where it started no
    earlier than the one before (all 16 M ranges at once would hold gigabytes)."""
    n = NULL
    nk = len(combo)
    out = np.full(nk, NO_CALL, dtype=np.int64)
    bounds = id_bounds(store, "nvtx_event", run)
    if bounds is None or not nk:
        return out
    # one code per instance key text (names, else path), shared by launches and ranges
    text: dict[str, int] = {}
    launch_text = np.array([text.setdefault(names or path, len(text)) for names, path in info], dtype=np.int64)
    path_text = {
        p: text.setdefault(names or path, len(text))
        for p, names, path in store.conn.execute("SELECT id, names, path FROM nvtx_path")
    }
    ltext = launch_text[combo]
    wanted = np.zeros(len(text), dtype=bool)  # texts some launch has: no other range can match
    wanted[ltext] = True
    paths = [p for p, t in path_text.items() if wanted[t]]
    if not paths:
        return out
    text_of = np.zeros(max(paths) + 1, dtype=np.int64)  # path id -> its text code
    text_of[paths] = [path_text[p] for p in paths]
    has = api != n
    best_id = np.full(nk, NO_CALL, dtype=np.int64)
    best_start = np.zeros(nk, dtype=np.int64)
    best_end = np.zeros(nk, dtype=np.int64)

    def match(rid, rtext, rank, pid, tid, rstart, rend) -> None:
        """Keep, per launch, the latest of these ranges (in id order) that holds its call."""
        key = columns.row_key(
            [np.concatenate([ltext, rtext]), *(np.concatenate(x) for x in zip(thread, (rank, pid, tid)))]
        )
        # ranges and launch calls on one sorted line per key: a launch call after every range
        # that started at or before it (bisect_right), ranges of equal start by id (their order)
        t = np.concatenate([np.where(has, api, rstart.min()), rstart])  # (a launch without a call: anywhere)
        kind = np.concatenate([np.ones(nk, dtype=np.int64), np.zeros(len(rid), dtype=np.int64)])
        order = columns.lex_order([kind, t, key])
        is_range = kind[order] == 0
        last = np.maximum.accumulate(np.where(is_range, np.arange(len(order)), -1))  # latest range so far
        launch = order[~is_range]
        r = last[~is_range]
        ok = r >= 0
        rr = order[np.where(ok, r, 0)] - nk  # that range's row
        ok &= key[nk + rr] == key[launch]
        launch, rr = launch[ok], rr[ok]
        # a later batch's ids are larger: of equal starts, its instance is the later one
        take = (best_id[launch] == NO_CALL) | (rstart[rr] >= best_start[launch])
        launch, rr = launch[take], rr[take]
        best_id[launch], best_start[launch], best_end[launch] = rid[rr], rstart[rr], rend[rr]

    held: list[tuple] = []  # stretches read and not yet matched
    lo, hi = bounds
    stretches = [(a, min(hi, a + chunk - 1)) for a in range(lo, hi + 1, chunk)]

    def read(k: int):
        """Stretch k's ranges, under way on threads of their own (the next is read while one is
        matched). (The path test first: it turns most rows away before the run's text is compared.)"""
        return store.int_columns_by_ids(
            f"""
            SELECT id, path_id, coalesce(rank, {n}), coalesce(pid, {n}), coalesce(tid, {n}), start_ns, end_ns
            FROM nvtx_event WHERE id {{between}} AND path_id IN ({",".join(map(str, paths))})
                  AND +run = ? AND start_ns IS NOT NULL AND end_ns IS NOT NULL""",
            (run,),
            7,
            stretches[k],
            later=True,
        )

    ahead = read(0)
    try:
        for k, (_, b) in enumerate(stretches):
            got = ahead.result()[0]
            ahead = read(k + 1) if k + 1 < len(stretches) else None
            if len(got[0]):
                held.append(tuple(got))
            if held and (b == hi or sum(len(h[0]) for h in held) >= chunk):
                rid, rpath, rank, pid, tid, rstart, rend = (
                    np.concatenate(x) if len(held) > 1 else x[0] for x in zip(*held)
                )
                held = []
                if not (np.diff(rid) > 0).all():  # (in id order, as SQLite gives a table's rows)
                    by_id = np.argsort(rid, kind="stable")
                    rid, rpath, rank, pid, tid, rstart, rend = (
                        x[by_id] for x in (rid, rpath, rank, pid, tid, rstart, rend)
                    )
                match(rid, text_of[rpath], rank, pid, tid, rstart, rend)
    finally:
        if ahead is not None:
            ahead.stop()  # (an error or an interrupt: the read ends before the caller goes on)
    ok = (best_id != NO_CALL) & has & (best_end >= api)
    out[ok] = best_id[ok]
    return out


def variants(paths) -> list[str]:
    """The parts that tell otherwise equal NVTX paths apart (a lab run's variants: eager,
    triton ...): what RUN:VARIANT selects."""
    parts = [p.split("/") for p in dict.fromkeys(p for p in paths if p)]
    found: dict[str, None] = {}
    by_len: dict[int, list] = {}
    for p in parts:
        by_len.setdefault(len(p), []).append(p)
    for same in by_len.values():
        for i, a in enumerate(same):
            for b in same[i + 1 :]:
                diff = [k for k in range(len(a)) if a[k] != b[k]]
                if len(diff) == 1:
                    found[a[diff[0]]] = None
                    found[b[diff[0]]] = None
    return list(found)


def pair(store: Store, before: Selector, after: Selector, as_columns: bool = False) -> list[Pair]:
    """Ranges present on both sides, in the before side's order (`as_columns`: their launches
    as Launches, else as a Group's rows)."""
    if before == after:
        raise BadArgument(f"{before} compared with itself: name two runs, or RUN:BEFORE RUN:AFTER")
    a: dict[str, Launches] | dict[str, Group]
    b: dict[str, Launches] | dict[str, Group]
    if as_columns:  # (the after side's launches read while the before side's are grouped)
        ahead = launch_read(store, after.run) if after.run != before.run else None
        try:
            a, b = launch_groups(store, before), launch_groups(store, after, ahead)
        finally:
            if ahead is not None:
                ahead.stop()  # (read or not: ended before the caller goes on)
    else:
        a, b = groups(store, before), groups(store, after)
    pairs = [Pair(k, a[k], b[k]) for k in a if k in b]
    if not pairs:
        raise BadArgument(
            f"{before} and {after} share no NVTX range "
            f"(before: {', '.join(sorted(a)[:3])}; after: {', '.join(sorted(b)[:3])})"
        )
    return pairs


def iterations(kernels: list[dict]) -> list[list[dict]]:
    """Split a range's launches into its calls.

    A range entered several times (a training step, a forward) has one call per instance:
    the launches groups() found inside each (its `call`). The pattern of kernel names cannot
    tell calls apart where one call launches the same kernel twice. A range entered once
    (the lab runs each variant ``iters`` times inside its range), or launches without a known
    instance: the smallest period of the kernel-name sequence that repeats exactly gives one
    call; a sequence that does not repeat is one call.
    """
    calls = [k.get("call") for k in kernels]
    if kernels and None not in calls and len(set(calls)) > 1:
        by: dict = {}
        for k in kernels:
            by.setdefault(k["call"], []).append(k)
        return list(by.values())
    names = [k["kernel_name"] for k in kernels]
    n = len(names)
    for period in range(1, n // 2 + 1):
        if n % period == 0 and all(names[i] == names[i % period] for i in range(n)):
            return [kernels[i : i + period] for i in range(0, n, period)]
    return [kernels] if kernels else []
