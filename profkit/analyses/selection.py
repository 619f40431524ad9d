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
class Pair:
    key: str
    before: Group
    after: Group


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
        if not sel.component:
            raise BadArgument(f"{sel}: no kernels under an NVTX range")
        known = variants([r["nvtx_path"] for r in rows])
        import difflib

        close = difflib.get_close_matches(sel.component, known, n=1)
        hint = f"did you mean {sel.run}:{close[0]}? " if close else ""
        raise BadArgument(
            f"{sel}: no NVTX path of run {sel.run!r} has a part {sel.component!r}; {hint}"
            f"variants of this run: {', '.join(known) or 'none'}"
        )
    return out


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


def pair(store: Store, before: Selector, after: Selector) -> list[Pair]:
    """Ranges present on both sides, in the before side's order."""
    if before == after:
        raise BadArgument(f"{before} compared with itself: name two runs, or RUN:BEFORE RUN:AFTER")
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
