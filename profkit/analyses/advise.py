"""What to fix first, how much it will save, and how that figure was computed.

For a run (or the ranges under one NVTX path) advise ranks *items* by the GPU time they could
give back (`recoverable_ns`), each with its share of the time, its label, the next step for
that label and the rows of evidence behind the figure. Two kinds of item:

- **range** (an operator: the innermost NVTX range that launched kernels, e.g. `norm`,
  `rmsnorm/eager/llama8b-t32768`; kernels outside any range form one item per kernel name).
  Its floor per call is the time at the roofline of what it must do:
    * the operator's own minimum (lab workloads: `bytes`/`flops` of the operator's model, moved
      at the DRAM bandwidth and computed at the peak of its precision), else
    * a chain of kernels fused: the bytes the chain reads from outside plus the bytes its last
      kernel writes (DRAM reads - writes + 2 x the last kernel's writes; the intermediates stay on
      chip), needing ncu's DRAM read/write split, else
    * each kernel at its own roofline (profkit.model.perf.roof_time_ns: the slowest of its bytes per
      memory level and its FLOPs per precision at their peaks).
  recoverable = measured GPU time - floor, over every call. Launches ncu did not measure borrow
  the measured fraction of a launch of the same kernel at the same place (said in evidence).
  Bandwidth: the measured copy bandwidth of the GPU when the caller passes measured peaks (what a
  real kernel can reach), else the report's DRAM peak.
- **graph** (a repeated call: a decode `step`, a `forward`; profkit.analyses.timeline.calls): the GPU
  sits idle between launches while the CPU launches the next one. A CUDA-graph replay removes
  that, except the device's own gap between back-to-back kernels, measured in the same run (the
  median gap between kernels that were already queued when the previous one ended):
  recoverable = idle - kernels x that gap, over every call.

ncu's own estimated speed-ups (the `rules` view, where a report carries rule results) are shown
beside profkit's figure. Nothing is written here: `profkit advise` stores the list (the `advice`
view) as an explicit step, like `classify`.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import re
import statistics
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from profkit.analyses import fusion, phases, unfused_attention
from profkit.analyses import timeline as tl
from profkit.analyses.advice_item import LAUNCH_GAP_NS, Item
from profkit.analyses.classify import MEM_PCT, SM_PCT, Facts, label_facts
from profkit.analyses.selection import id_bounds
from profkit.core import columns
from profkit.core.errors import BadArgument, BadInput
from profkit.core.intervals import minus_arrays, union_arrays
from profkit.core.metrics import lookup
from profkit.core.names import is_comm
from profkit.core.steps import step_free as _step_free
from profkit.model import attainable, families
from profkit.model.ops.lab import model_of as lab_model_of
from profkit.model.perf import rates, roof_time_ns, work
from profkit.store.store import Store, lab_op

# a call whose launches are fewer than this is already graphed (a replay is one launch call)
GRAPHED_CALLS_PER_KERNEL = 0.5
# fewer queued back-to-back pairs than this: the device gap is not measured, this stands in
DEFAULT_DEVICE_GAP_NS = 1_000
MIN_GAP_PAIRS = 20
# the next step per classify rule (the rule that gave the label: reason, evidence and next step
# read the same numbers); a library kernel's step names its family's levers instead of its code
ACTIONS = {
    "launch_overhead": "fuse or CUDA-graph the launches: each kernel is shorter than its launch",
    "occupancy": "raise occupancy: {limiter}",
    "tensor_core": "at the tensor pipe's limit: a better tile, or a lower precision (fp8)",
    "compute": "compute-bound on the CUDA cores: move the math to the tensor pipe or cut instructions",
    "latency": (
        f"latency-bound ({SM_PCT} and {MEM_PCT} both under 60 %): more independent work per SM, fewer dependent steps"
    ),
    "l1l2": "bound in L1/L2, not DRAM: cut re-reads (tile in shared memory or registers), coalesce the accesses",
    "warp_specialised": (
        "warp-specialised and waiting (issue slots and pipes under 60 %): deeper pipelining "
        "(more stages), larger tiles per CTA, or a persistent schedule"
    ),
    "communication": "overlap the collective with compute (profkit ranks shows how much is hidden)",
    "unknown": "no counters: capture with `profkit capture --metrics lean` to name the bound",
    "unmeasured": (
        "ncu measured other kernels of this run, not these: capture them (profkit capture --metrics "
        "lean, or widen ncu's --kernel-name/--launch-count filter) to name the bound"
    ),
    "unnamed": "the counters do not name the bound ({why}): capture with `profkit capture --metrics lean`",
    "no_floor": "{step} (no roofline floor: {why})",
}
# what a library kernel's label means for its user, before the levers
LIBRARY_STEP = {
    "occupancy": "its occupancy is the library's ({limiter})",
    "tensor_core": "at the tensor pipe's limit",
    "compute": "compute-bound inside the library",
    "latency": "latency-bound inside the library",
    "l1l2": "bound in L1/L2 inside the library",
    "warp_specialised": "warp-specialised and waiting inside the library",
    "dram": "memory-bound",
}
# DRAM this busy (% of peak) is at its roof: only fewer bytes help
DRAM_AT_ROOF_PCT = 80.0
# an item predicted below this never ranks above one predicted at or above it
MIN_SPEEDUP = 1.05
# labels of idle items whose cost a process pays once (profkit.analyses.idle_advice)
ONE_TIME = ("module_load",)


@dataclass
class Advice:
    run: str
    scope: str | None  # the NVTX path advised on (None: the whole run)
    gpu_ns: float
    wall_ns: float | None
    idle_ns: float | None
    items: list[Item]
    device_gap_ns: float
    device_gap_how: str
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {
            "run": self.run,
            "scope": self.scope,
            "gpu_ns": self.gpu_ns,
            "wall_ns": self.wall_ns,
            "idle_ns": self.idle_ns,
            "device_gap_ns": self.device_gap_ns,
            "device_gap_how": self.device_gap_how,
            "notes": self.notes,
            "items": [i.row() for i in self.items],
        }


# --- reading ---------------------------------------------------------------------------------

_COLUMNS = (
    "kernel_id, kernel_name, short_name, nvtx_range, nvtx_path, start_ns, end_ns, duration_ns, "
    "api_start_ns, api_end_ns, stream, device, source, rank, grid_x, grid_y, grid_z, block_x, block_y, block_z, "
    "family"
)


def _under(path: str | None, scope: str | None) -> bool:
    return scope is None or (path is not None and (path == scope or path.startswith(scope.rstrip("/") + "/")))


@dataclass
class _Launches:
    """A run's launches as columns, one entry each, in launch order (GPU start, then id): what
    advise reads of a million launches without a Python object per launch. Text columns are
    codes into the lists beside them; `rows()` reads whole rows of the few launches that need
    them (the first call of an operator, launches with counters)."""

    kid: np.ndarray
    start: np.ndarray  # 0 where unknown (has_start)
    end: np.ndarray
    has_start: np.ndarray
    has_end: np.ndarray
    dur: np.ndarray
    api_end: np.ndarray
    has_api_end: np.ndarray
    stream: np.ndarray  # (rank, device, stream) numbered
    ncu: np.ndarray  # source is ncu
    name: np.ndarray  # short name, else kernel name: into names
    kname: np.ndarray  # kernel name: into names
    path: np.ndarray  # readable NVTX path: into paths, -1 for none
    family: np.ndarray  # into families ('other' for none)
    grid: np.ndarray  # blocks in the grid (a missing dimension counts 1)
    names: list[str]
    paths: list[str]
    families: list[str]

    def __len__(self) -> int:
        return len(self.kid)

    def take(self, ix) -> _Launches:
        cols = {f: getattr(self, f)[ix] for f in _ARRAYS}
        return _Launches(**cols, names=self.names, paths=self.paths, families=self.families)

    def ranged(self) -> np.ndarray:
        """Launches inside an NVTX range (a non-empty path)."""
        named = np.array([bool(p) for p in self.paths] + [False], dtype=bool)
        return named[self.path]

    def timed(self) -> np.ndarray:
        return self.has_start & self.has_end

    def path_of(self, i: int) -> str | None:
        return self.paths[self.path[i]] if self.path[i] >= 0 else None


# a PyTorch operator's range (emit_nvtx, nsys --pytorch=autograd-shapes-nvtx): aten::mm, c10d::...
_OPERATOR_RANGE = re.compile(r"^[A-Za-z_]\w*::[\w.]+$")


def _without_operator_ranges(store: Store, run: str, ks: _Launches) -> _Launches:
    """Paths cut at the first PyTorch operator range, in a run whose operator ranges carried
    shapes: the program's own range (`block.eager`) is the item, its operators are its fusion
    floor's ops, and a launch under operator ranges alone is outside any range."""
    if not store.query("SELECT 1 FROM op_row WHERE run = ? AND source = 'nvtx' LIMIT 1", (run,)):
        return ks
    kept: dict[str, int] = {}
    code = []
    for p in ks.paths:
        parts = p.split("/")
        cut = next((i for i, x in enumerate(parts) if _OPERATOR_RANGE.match(x)), len(parts))
        mine = "/".join(parts[:cut])
        code.append(kept.setdefault(mine, len(kept)) if mine else -1)
    ks.path = np.array(code + [-1], dtype=np.int64)[ks.path]
    ks.paths = list(kept)
    return ks


_ARRAYS = ("kid start end has_start has_end dur api_end has_api_end stream ncu name kname path family grid").split()


def _read(store: Store, run: str, scope: str | None) -> _Launches:
    """The run's launches with a duration (under `scope`), as columns."""
    c = store.conn
    # twelve columns, not twenty: reading a column of a million rows costs more than the SQL
    # that packs several into one (null flags in bits; name, short name and call ids in one
    # number, the call's with the path's)
    names_n = c.execute("SELECT coalesce(max(id), 0) + 2 FROM launch_name").fetchone()[0]
    paths_n = c.execute("SELECT coalesce(max(id), 0) + 2 FROM nvtx_path").fetchone()[0]
    if names_n >= 1 << 31 or paths_n >= 1 << 31:
        raise BadInput(store.path, "name or path ids past 2^31: not a database profkit wrote")
    # the run's stretch of launch_row (selection.id_bounds), not a walk of its index; its halves
    # at once on a large run
    p = store.int_columns_by_ids(
        f"""
        SELECT id, coalesce(start_ns, 0), coalesce(end_ns, 0), duration_ns, coalesce(api_end_ns, 0),
               (start_ns IS NOT NULL) + 2 * (end_ns IS NOT NULL) + 4 * (api_end_ns IS NOT NULL)
               + 8 * (source = 'ncu') + 16 * (rank IS NULL) + 32 * (device IS NULL) + 64 * (stream IS NULL),
               coalesce(rank, -1), coalesce(device, -1), coalesce(stream, -1),
               name_id * {names_n} + coalesce(short_id, -1) + 1,
               (coalesce(api_id, -1) + 1) * {paths_n} + coalesce(path_id, -1) + 1,
               coalesce(nullif(grid_x, 0), 1) * coalesce(nullif(grid_y, 0), 1) * coalesce(nullif(grid_z, 0), 1)
        FROM launch_row
        WHERE id {{between}} AND +run = ? AND timeline_id IS NULL AND duration_ns IS NOT NULL
          AND duration_ns != 0""",
        (run,),
        12,
        id_bounds(store, "launch_row", run) or (1, 0),
    )[0]
    # an inherited launch's path is its lead thread's (the few rows of launch_inherit, placed by id)
    inherit = columns.ints(
        c,
        "SELECT i.launch_id, i.path_id FROM launch_inherit i CROSS JOIN launch_row l ON l.id = i.launch_id "
        "WHERE l.run = ? AND l.timeline_id IS NULL",
        (run,),
        2,
    )
    if len(inherit) and len(p[0]):
        by_id = np.argsort(p[0])
        at = by_id[np.minimum(np.searchsorted(p[0], inherit[:, 0], sorter=by_id), len(by_id) - 1)]
        hit = p[0][at] == inherit[:, 0]
        p[10][at[hit]] += inherit[hit, 1] - (p[10][at[hit]] % paths_n - 1)
    o = columns.lex_order([p[0], p[1]])  # as ORDER BY coalesce(start_ns, 0), kernel_id
    kid, start, end, dur, api_end, flags, rank, device, stream, name_pair, call_path, grid = (x[o] for x in p)
    del p, o
    name_id = name_pair // names_n
    api_id, path_id = np.divmod(call_path, paths_n)  # each one more than its id (0: none)
    text = dict(c.execute("SELECT id, name FROM launch_name"))
    names: dict[str, int] = {}

    def code(ids, of) -> np.ndarray:
        """Codes into `names` of name ids, through of(id) -> text."""
        u, inv = columns.unique_inverse(ids)
        return np.array([names.setdefault(of(int(i)), len(names)) for i in u], dtype=np.int64)[inv]

    kname = code(name_id, text.__getitem__)
    # short name, else kernel name
    name = code(name_pair, lambda v: text.get(v % names_n - 1) or text[v // names_n])
    # the readable path: the lead thread's where the launch inherited it (the kernels view's,
    # profkit.store.inherit), a launch's own where launch_nvtx holds one, else its path's
    paths: dict[str, int] = {}
    path_text = dict(c.execute("SELECT id, path FROM nvtx_path"))
    u, inv = columns.unique_inverse(path_id)
    path = np.array([paths.setdefault(path_text[int(i) - 1], len(paths)) if i else -1 for i in u], dtype=np.int64)[inv]
    own = c.execute(
        "SELECT o.launch_id, o.nvtx_path FROM launch_nvtx o JOIN launch_row l ON l.id = o.launch_id WHERE l.run = ? "
        "AND o.launch_id NOT IN (SELECT launch_id FROM launch_inherit)",
        (run,),
    ).fetchall()
    if own:
        order = np.argsort(kid)
        at = np.minimum(np.searchsorted(kid[order], [r[0] for r in own]), len(kid) - 1)
        for (lid, text_), i in zip(own, order[at].tolist()):
            if kid[i] == lid:
                path[i] = -1 if text_ is None else paths.setdefault(text_, len(paths))
    # the family: the kernels view's, read once per kernel name and launch call
    u, first, inv = np.unique(name_id * names_n + api_id, return_index=True, return_inverse=True)
    ids = kid[first].tolist()
    fam_of = dict(
        c.execute(
            "SELECT kernel_id, family FROM kernels WHERE kernel_id IN (SELECT value FROM json_each(?))",
            (json.dumps(ids),),
        )
    )
    families: dict[str, int] = {}
    family = np.array([families.setdefault(fam_of.get(i) or "other", len(families)) for i in ids], dtype=np.int64)[
        inv.reshape(-1)
    ]
    return _scoped(
        _Launches(
            kid=kid,
            start=start,
            has_start=(flags & 1).astype(bool),
            end=end,
            has_end=(flags & 2).astype(bool),
            dur=dur,
            api_end=api_end,
            has_api_end=(flags & 4).astype(bool),
            stream=columns.row_key(np.column_stack([rank, device, stream, flags & 112])),
            ncu=(flags & 8).astype(bool),
            name=name,
            kname=kname,
            path=path,
            family=family,
            grid=grid,
            names=list(names),
            paths=list(paths),
            families=list(families),
        ),
        scope,
    )


def _scoped(ls: _Launches, scope: str | None) -> _Launches:
    if scope is None:
        return ls
    inside = np.array([_under(p, scope) for p in ls.paths] + [False], dtype=bool)
    return ls.take(inside[ls.path])


def _rows(store: Store, ls: _Launches, ix) -> list[dict]:
    """Whole rows (the kernels view's) of some launches, in their order."""
    ids = ls.kid[ix].tolist()
    got = {
        r["kernel_id"]: r
        for r in store.query(
            f"SELECT {_COLUMNS} FROM kernels WHERE kernel_id IN (SELECT value FROM json_each(?))", (json.dumps(ids),)
        )
    }
    return [got[i] for i in ids]


def _keep(ls: _Launches, win: tuple[int, int] | None) -> _Launches:
    """phases.keep on columns: the launches starting inside the window."""
    if win is None:
        return ls
    return ls.take(ls.has_start & (ls.start >= win[0]) & (ls.start < win[1]))


def _rules(store: Store, run: str) -> dict[int, float]:
    """kernel_id -> ncu's largest estimated speed-up (%), where the report carried rule results."""
    try:
        rows = store.query(
            "SELECT kernel_id, max(estimated_speedup_pct) AS s FROM rules WHERE run = ? "
            "AND estimated_speedup_pct IS NOT NULL GROUP BY kernel_id",
            (run,),
        )
    except Exception:  # a database from before the rules view
        return {}
    return {r["kernel_id"]: r["s"] for r in rows}


def _meta(store: Store, run: str) -> dict:
    row = store.query("SELECT meta, gpu_name FROM runs WHERE run = ?", (run,))
    meta = json.loads(row[0]["meta"] or "{}") if row else {}
    meta.setdefault("gpu_name", row[0]["gpu_name"] if row else None)
    return meta


# --- the device's own gap between back-to-back kernels -----------------------------------------


def device_gap(ls: _Launches) -> tuple[float, str]:
    """Median gap between consecutive kernels of a stream where the second was already launched
    (its launch call ended) before the first ended: no CPU in the way, only the device's own
    launch latency, which a graph replay keeps."""
    t = ls.take(ls.timed() & ~ls.ncu)
    # by stream, then start (launch order among equal starts)
    o = np.lexsort((np.arange(len(t)), t.start, t.stream))
    st, s0, e0, api, has_api = t.stream[o], t.start[o], t.end[o], t.api_end[o], t.has_api_end[o]
    pair = (st[1:] == st[:-1]) & has_api[1:] & (api[1:] < e0[:-1]) & (s0[1:] >= e0[:-1])
    gaps = np.sort((s0[1:] - e0[:-1])[pair])
    if len(gaps) >= MIN_GAP_PAIRS:
        n = len(gaps)  # statistics.median's figure: the middle one, or the mean of the middle two
        mid = int(gaps[n // 2]) if n % 2 else (int(gaps[n // 2 - 1]) + int(gaps[n // 2])) / 2
        return mid, f"median of {len(gaps)} gaps between queued back-to-back kernels in this run"
    return DEFAULT_DEVICE_GAP_NS, (
        f"{DEFAULT_DEVICE_GAP_NS / 1e3:.1f} us assumed: only {len(gaps)} queued "
        f"back-to-back kernel pairs in this run (need {MIN_GAP_PAIRS})"
    )


# --- the floor of an operator -----------------------------------------------------------------


def _bandwidth(counters: list[dict], measured: list[dict] | None, gpu: str | None) -> tuple[float | None, str]:
    for p in measured or ():
        if p["ceiling"] == "dram" and p["gpu"] == gpu:
            return p["value"], f"measured copy bandwidth {p['value'] / 1e12:.2f} TB/s ({p['how']})"
    bws = [rates(c)["dram"][0] for c in counters if "dram" in rates(c)]
    if bws:
        bw = statistics.median(bws)
        return bw, f"report's DRAM peak {bw / 1e12:.2f} TB/s"
    return None, "no DRAM bandwidth known"


def _flop_floor(flops: dict[str, float], counters: list[dict], measured, gpu) -> tuple[float, str]:
    """Time for `flops` ({precision: FLOPs}) at the peaks: the slowest precision (pipes overlap)."""
    best, how = 0.0, ""
    for prec, n in flops.items():
        peak = next((p["value"] for p in measured or () if p["ceiling"] == prec and p["gpu"] == gpu), None)
        src = "measured"
        if peak is None:
            rs = [rates(c)[prec][0] for c in counters if prec in rates(c)]
            peak, src = (statistics.median(rs), "report peak") if rs else (None, "")
        if peak:
            t = n / peak * 1e9
            if t > best:
                best, how = t, f"{n / 1e9:.3g} GFLOP {prec} at {peak / 1e12:.0f} TFLOP/s ({src})"
    return best, how


def _operator_model(path: str | None, meta: dict) -> tuple[dict | None, str]:
    """The lab operator's minimum bytes and FLOPs per call for a path op/variant/shape, when the
    run came from a lab workload (the formulas live in the model layer: no lab import)."""
    if not path or not lab_op(meta):
        return None, ""
    return lab_model_of(path, meta.get("dtype"))


def _operator_floor(
    calls: list[list[dict]],
    counters: dict[int, dict],
    meta: dict,
    measured,
    gpu,
    path: str | None,
    ops: dict | None = None,
) -> tuple[float | None, str, str, float | None]:
    """(floor ns per call, how, what it is: operator|fused|chain|kernels|none, bytes the operator
    needs). A range with recorded shapes and no lab model floors at its fusion floor (fusion.py):
    its operators' external inputs and outputs, beside the per-kernel floor in `how`."""
    t, how, kind, need = _floor(calls, counters, meta, measured, gpu, path)
    if ops and kind != "operator" and len(calls[0]) > 1:
        bw = _bandwidth([c for c in (counters.get(k["kernel_id"]) for k in calls[0]) if c], measured, gpu)[0]
        fused = fusion.floor(calls[0], ops, bw, gpu, measured)
        if fused is not None:
            beside = f"; per kernel: {how}" if t is not None else ""
            return fused[0], fused[1] + beside, "fused", fused[2]
    return t, how, kind, need


def _floor(calls, counters, meta, measured, gpu, path):
    first = calls[0]
    cs = [counters.get(k["kernel_id"]) for k in first]
    have = [c for c in cs if c]
    model_, model_how = _operator_model(path, meta)
    bw, bw_how = _bandwidth(have, measured, gpu)
    if model_ and bw:
        t_bytes = model_["bytes"] / bw * 1e9
        done: dict[str, float] = defaultdict(float)
        for c in have:
            for p, n in work(c).items():
                done[p] += n
        prec = max(done, key=done.get) if done else None  # the precision the operator computes in
        t_flops, f_how = _flop_floor({prec: model_["flops"]}, have, measured, gpu) if prec else (0.0, "")
        if t_flops > t_bytes:
            return t_flops, f"{model_how}: {f_how}", "operator", model_["bytes"]
        return t_bytes, f"{model_how}: {model_['bytes'] / 1e6:,.1f} MB at the {bw_how}", "operator", model_["bytes"]
    if len(have) == len(cs) and len(cs) > 1 and bw:
        reads = [lookup(c, "dram_read_bytes") for c in cs]
        writes = [lookup(c, "dram_write_bytes") for c in cs]
        if None not in reads and None not in writes:
            chain = sum(reads) - sum(writes) + 2 * writes[-1]
            flops: dict[str, float] = {}
            for c in cs:
                for p, n in work(c).items():
                    flops[p] = flops.get(p, 0.0) + n
            t_flops, f_how = _flop_floor(flops, have, measured, gpu)
            t_bytes = max(chain, 0) / bw * 1e9
            moved = sum(reads) + sum(writes)
            how = (
                f"{len(cs)} kernels fused: {max(chain, 0) / 1e6:,.1f} MB from outside and out (they move "
                f"{moved / 1e6:,.1f} MB now) at the {bw_how}"
            )
            if t_flops > t_bytes:
                return t_flops, f"{len(cs)} kernels fused: {f_how}", "chain", max(chain, 0)
            return t_bytes, how, "chain", max(chain, 0)
    if have and len(have) == len(cs):
        roofs = [roof_time_ns(c) for c in cs]
        if None not in roofs:
            bound = max(roofs, key=lambda r: r[0])[1]
            return (
                sum(r[0] for r in roofs),
                f"each kernel at its own roofline (bound mostly by {bound}; report peaks at the kernel's clocks)",
                "kernels",
                None,
            )
    if have:
        why = (
            f"ncu measured {len(have)} of the {len(cs)} kernels of the first call: a floor needs them all"
            if len(have) < len(cs)
            else "the counters lack a peak or the DRAM bytes of the work they count"
        )
    else:
        why = "no counters for these launches"
    return None, why + (f"; {model_how}" if model_how else ""), "none", None


def _around_library(call: list[dict], counters: dict, measured, gpu) -> tuple[float, str] | None:
    """What fusing a chain can attain when library GEMMs are in it: torch.compile (the lever a
    user holds) calls cuBLAS/CUTLASS for the matmuls and fuses the kernels between them, not into
    them. So the GEMMs keep their time, bounded by the GEMM family's attainable share of their
    roof, and each run of other kernels between them fuses into one (its external DRAM bytes at
    the bandwidth: reads - writes + 2 x its last kernel's writes). None: no library GEMM in the
    chain, or a counter missing."""
    gemm = [families.get(k.get("family")).attain == "gemm" for k in call]
    if not any(gemm) or all(gemm):
        return None
    cs = [counters.get(k["kernel_id"]) for k in call]
    if not all(cs):
        return None
    bw, bw_how = _bandwidth([c for c in cs if c], measured, gpu)
    if not bw:
        return None
    eff = attainable.of("gemm").efficiency
    t_gemm = 0.0
    segments: list[list[dict]] = [[]]  # the runs of other kernels, split at each GEMM
    for k, c, is_gemm in zip(call, cs, gemm):
        if is_gemm:
            roof = roof_time_ns(c) if c else None
            own = k["duration_ns"] or 0
            t_gemm += min(own, roof[0] / eff) if roof else own
            segments.append([])
        elif c:
            segments[-1].append(c)
    moved, runs = 0.0, 0
    for seg in (s for s in segments if s):
        reads = [lookup(c, "dram_read_bytes") for c in seg]
        writes = [lookup(c, "dram_write_bytes") for c in seg]
        if None in reads or None in writes:
            return None
        moved += max(0.0, sum(r or 0.0 for r in reads) - sum(w or 0.0 for w in writes) + 2 * (writes[-1] or 0.0))
        runs += 1
    t_rest = moved / bw * 1e9
    how = (
        f"torch.compile fuses around library GEMMs, not into them: {sum(gemm)} GEMMs at "
        f"{t_gemm / 1e3:,.1f} us (their time, or {eff:.0%} of their roof where faster), the {runs} runs of "
        f"kernels between them fused: {moved / 1e6:,.1f} MB at the {bw_how}"
    )
    return t_gemm + t_rest, how


# --- the analysis ----------------------------------------------------------------------------


def _moved(call: list[dict], counters: dict) -> float | None:
    """DRAM bytes one call moves, when ncu measured every kernel of it."""
    b = [lookup(counters.get(k["kernel_id"]) or {}, "dram_bytes") for k in call]
    got = [x for x in b if x is not None]
    return None if len(got) < len(b) else float(sum(got))


def _top(codes: np.ndarray, dur: np.ndarray, keys: list):
    """The key (of `keys`, by code) holding the most GPU time among these launches, the first
    to appear among equals; None for no launches."""
    if not len(codes):
        return None
    u, first = np.unique(codes, return_index=True)
    u = u[np.argsort(first)]  # in order of first appearance
    # float sums added in launch order, as a float accumulator over the launches would
    t = np.bincount(codes, weights=dur.astype(np.float64))[u]
    return keys[int(u[int(np.argmax(t))])]


def _label_of(g: _Launches, ix: np.ndarray, facts: Facts) -> str | None:
    return _top(facts.codes(g.kid[ix]), g.dur[ix], facts.labels)


def _rule_of(g: _Launches, ix: np.ndarray, facts: Facts, label: str | None) -> tuple[str, str]:
    """(rule, reason) of the longest launch among `ix` that carries `label`."""
    if label not in facts.labels:
        return "none", ""
    ix = ix[facts.codes(g.kid[ix]) == facts.labels.index(label)]
    f = facts.get(int(g.kid[ix[int(np.argmax(g.dur[ix]))]])) if len(ix) else None
    return (f[1], f[2]) if f else ("none", "")


def _family_of(g: _Launches) -> str | None:
    """The family holding most of these launches' GPU time."""
    return _top(g.family, g.dur, g.families)


def _with_counters(g: _Launches, counters: dict) -> np.ndarray:
    """Launches with counters (their own, or their sampled sibling's)."""
    if not counters:
        return np.zeros(len(g), dtype=bool)
    return np.isin(g.kid, np.fromiter((k for k, c in counters.items() if c), dtype=np.int64))


def _dram_pct(kids: list[int], counters: dict) -> float | None:
    """DRAM throughput (% of peak) of the measured launches, weighted by their duration."""
    raw = [(lookup(c, "dram_pct"), lookup(c, "duration")) for k in kids if (c := counters.get(k))]
    w: list[tuple[float, float]] = [(p, d) for p, d in raw if p is not None and d]
    return sum(p * d for p, d in w) / sum(d for _, d in w) if w else None


def _ncu_max(kids: np.ndarray, rules: dict) -> float | None:
    """ncu's largest estimated speed-up among these launches."""
    if not rules:
        return None
    hit = kids[np.isin(kids, np.fromiter(rules, dtype=np.int64))]
    return max((rules[k] for k in hit.tolist()), default=None)


def _by_name(g: _Launches) -> list[tuple[str, np.ndarray]]:
    """The launches per name (short name, else kernel name), most GPU time first (first to
    appear among equals), each as indexes in launch order."""
    parts = _groups(g.name)
    parts.sort(key=lambda x: -int(g.dur[x[1]].sum()))
    return [(g.names[code], ix) for code, ix in parts]


def _groups(codes: np.ndarray) -> list[tuple[int, np.ndarray]]:
    """The launches per code (negative codes left out), in order of first appearance, each as
    indexes in launch order."""
    order = np.argsort(codes, kind="stable")
    order = order[codes[order] >= 0]
    cut = np.flatnonzero(np.diff(codes[order])) + 1
    parts = np.split(order, cut) if len(order) else []
    parts.sort(key=lambda ix: ix[0])
    return [(int(codes[ix[0]]), ix) for ix in parts]


def _period(names: np.ndarray) -> int:
    """selection.iterations for launches without a known instance: the length of one call, the
    smallest period of the kernel-name sequence that repeats exactly (all of them where none
    does)."""
    n = len(names)
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    for p in sorted(set(small + [n // d for d in small])):
        if p > n // 2:
            break
        if names[p] == names[0] and np.array_equal(names[p : 2 * p + 64], names[: min(p + 64, n - p)]):
            if np.array_equal(names[p:], names[:-p]):
                return p
    return n


def _step(
    label: str | None, rule: str, reason: str, fam: str | None, c0: dict | None, dram: float | None, bytes_: str = ""
) -> str:
    """The next step for a label, read from the rule that gave it; for a library kernel, the
    levers its user holds (its family's), never a change to its code."""
    f = families.get(fam)
    if label == "launch_overhead":
        return ACTIONS["launch_overhead"]
    if label == "communication" or fam == "nccl":
        return ACTIONS["communication"]
    if label == "unknown" or label is None:
        if c0:
            return ACTIONS["unnamed"].format(why=reason.split(" (evidence")[0] or "see the evidence")
        return ACTIONS["unknown"]
    at_roof = label == "dram" and dram is not None and dram >= DRAM_AT_ROOF_PCT
    if f.is_library:
        if at_roof:
            what = f"at the memory roof (DRAM throughput {dram:.0f} % of peak): only fewer bytes help"
        elif label == "occupancy":
            what = LIBRARY_STEP["occupancy"].format(limiter=_limiter(c0))
        else:
            what = LIBRARY_STEP.get(rule, LIBRARY_STEP.get(label, f"{label}-bound"))
        return f"{f.title} ({what}{bytes_}): its code is the library's; the levers you hold: {families.levers(fam)}"
    if at_roof:
        return f"at the memory roof (DRAM throughput {dram:.0f} % of peak): move fewer bytes{bytes_}"
    if label == "occupancy":
        return ACTIONS["occupancy"].format(limiter=_limiter(c0))
    if label == "dram":
        return f"reach the memory roofline{bytes_}"
    return ACTIONS.get(rule if rule in ACTIONS else label, ACTIONS["unknown"])


def _limiter(c: dict | None) -> str:
    if not c:
        return "the occupancy limiter is not in the counters"
    found = {k: lookup(c, k) for k in ("limit_registers", "limit_shared_mem", "limit_warps", "limit_blocks")}
    lims: dict[str, float] = {k[6:]: v for k, v in found.items() if v is not None}
    if not lims:
        return "the occupancy limiter is not in the counters"
    lim = min(lims, key=lims.__getitem__)
    theo = lookup(c, "theoretical_occupancy")
    return f"limited by {lim.replace('_', ' ')} ({lims[lim]:.0f} blocks per SM" + (
        f", theoretical {theo:.0f} %)" if theo is not None else ")"
    )


def _names(g: _Launches) -> str:
    """The launches' names, most GPU time first (three, and how many more)."""
    parts = _by_name(g)
    names = [n for n, _ in parts]
    return ", ".join(names[:3]) + (f" +{len(names) - 3} more" if len(names) > 3 else "")


def _range_item(
    path: str | None,
    g: _Launches,
    rows_of,
    counters: dict,
    facts: Facts,
    meta: dict,
    measured,
    gpu,
    rules: dict,
    own: set,
    ops: dict | None = None,
) -> Item:
    # its calls: equal runs of `period` launches (selection.iterations); outside any range, one call
    period = _period(g.kname) if path is not None else len(g)
    n_calls = len(g) // period
    first = rows_of(np.arange(period))  # the first call, whole rows: the floor is computed on it
    gpu_ns = float(int(g.dur.sum()))
    per_call = gpu_ns / n_calls
    # the label of the launches ncu measured, where some were (the others' labels rest on the timeline)
    has_c = _with_counters(g, counters)
    judged = np.flatnonzero(has_c) if has_c.any() else np.arange(len(g))
    label = _label_of(g, judged, facts)
    rule, reason = _rule_of(g, judged, facts, label)
    fam = _family_of(g)
    floor, how, what, need_bytes = _operator_floor([first], counters, meta, measured, gpu, path, ops)
    # launches with counters: ncu's own, or (sampled captures) their measured sibling's
    measured_ids = set(g.kid[has_c].tolist())
    by_ncu = len(measured_ids & own)
    if floor is not None and what in ("kernels", "chain") and n_calls > 1:
        first_ids = set(g.kid[:period].tolist())
        if not first_ids <= measured_ids:  # the floor was computed on a call ncu did not measure
            floor, how = None, "ncu did not measure every kernel of the first call, which the floor is computed on"
    rec = max(0.0, per_call - floor) * n_calls if floor is not None else 0.0
    kernels_per_call = period
    c0 = counters[int(g.kid[judged[0]])] if has_c.any() else None
    moved = _moved(first, counters)
    bytes_ = ""
    if moved and need_bytes:
        whose = "the operator needs" if what == "operator" else "fused, the chain needs"
        bytes_ = f": they move {moved / 1e6:,.1f} MB per call, {whose} {need_bytes / 1e6:,.1f} MB"
    elif moved:
        bytes_ = f": {moved / 1e6:,.1f} MB per call"
    elif what == "fused" and need_bytes:
        bytes_ = f": fused, the operators need {need_bytes / 1e6:,.1f} MB per call"
    dram = _dram_pct(g.kid[has_c].tolist(), counters)
    if (
        what in ("operator", "chain", "fused")
        and kernels_per_call > 1
        and label in ("dram", "launch_overhead", "latency", None)
    ):
        action = f"fuse the {kernels_per_call} kernels of each call into one{bytes_}"
    else:
        action = _step(
            label, rule, reason, fam, c0, dram if what == "kernels" else None, bytes_ if label == "dram" else ""
        )
    if floor is None and measured_ids:  # counters, but no floor from them: the label's step stands
        action = ACTIONS["no_floor"].format(step=action, why=how)
    elif floor is None:
        action = ACTIONS["unmeasured" if counters else "unknown"]
    how_text = (
        f"measured {per_call / 1e3:,.1f} us per call - floor {floor / 1e3:,.1f} us ({how}), x {n_calls} calls"
        if floor is not None
        else how
    )
    if by_ncu < len(g) and floor is not None:
        how_text += f"; {by_ncu} of {len(g)} launches measured by ncu" + (
            f", {len(measured_ids) - by_ncu} through their measured sibling (sampled_from)"
            if len(measured_ids) > by_ncu
            else ""
        )
    evidence: list[dict] = []
    for name, group in _by_name(g):
        cs = [c for k in g.kid[group[has_c[group]]].tolist() if (c := counters.get(k))]
        roofs = [r for c in cs if (r := roof_time_ns(c)) is not None]
        durations = [d for c in cs if (d := lookup(c, "duration")) is not None]
        roof_pct = None
        if cs and len(roofs) == len(cs) and len(durations) == len(cs):
            roof_pct = 100.0 * sum(r[0] for r in roofs) / sum(durations)
        evidence.append(
            {
                "kernel": name,
                "launches": len(group),
                "gpu_us": int(g.dur[group].sum()) / 1e3,
                "label": _label_of(g, group, facts),
                "measured_launches": len(cs),
                "roofline_pct": roof_pct,
                "dram_mb_per_launch": (statistics.mean(lookup(c, "dram_bytes") or 0 for c in cs) / 1e6 if cs else None),
                "ncu_speedup_pct": _ncu_max(g.kid[group], rules),
            }
        )
    ncu: float | None = max((e["ncu_speedup_pct"] for e in evidence if e["ncu_speedup_pct"] is not None), default=None)
    names = _names(g)
    if is_comm(names):
        action = ACTIONS["communication"]
    window = None
    if g.has_start.all():
        ends, starts = g.end.reshape(n_calls, period).max(1), g.start.reshape(n_calls, period).min(1)
        window = float(int((ends - starts).sum()))
    it = Item(
        "range",
        path,
        names,
        label,
        n_calls,
        len(g),
        gpu_ns,
        window,
        rec,
        floor,
        how_text,
        action,
        evidence,
        ncu,
        family=fam,
    )
    around = _around_library(first, counters, measured, gpu) if what == "chain" else None
    _predict(it, what, _sms(c0), _grid(g), measured, dram, around)
    return it


def _idle_items(ks: _Launches, every: _Launches, scope: str | None, gap: float) -> list[Item]:
    """One idle item per outermost range under the scope (the ranges just below it). Step ranges
    (`step 1`, `step 2`, ..., ProfilerStep#N: each pushed once under its own name) are one item,
    `step *`, whose calls are the steps."""
    t = every.timed()
    if not t.any():
        return []
    bs, be = union_arrays(every.start[t], every.end[t])
    depth = 0 if scope is None else scope.rstrip("/").count("/") + 1
    tops: dict[str, int] = {}
    top = np.array(
        [tops.setdefault("/".join(p.split("/")[: depth + 1]), len(tops)) for p in ks.paths] + [-1], dtype=np.int64
    )[ks.path]
    top[~(ks.ranged() & ks.timed())] = -1
    free: dict[str, int] = {}
    free_of = np.array([free.setdefault(_step_free(x), len(free)) for x in tops] + [-1], dtype=np.int64)
    item = free_of[top]  # (top -1 reads the last: -1)
    out = []
    names = list(free)
    for code, members in _groups(item):
        calls = top[members]
        it = _idle_item(names[code], ks.take(members), gap, bs, be, calls if (calls != calls[0]).any() else None)
        if it is not None:
            out.append(it)
    return out


def _idle_item(
    path: str, g: _Launches, gap: float, bs: np.ndarray, be: np.ndarray, calls: np.ndarray | None = None
) -> Item | None:
    """A range on a timeline: the time the GPU runs no kernel at all inside its calls' windows,
    in gaps short enough to be launches, less the device's own gap per kernel, is what a graph
    (or removing what keeps the GPU waiting) gives back. `bs`, `be`: when the GPU is busy.
    `calls`: each launch's call (a step range), else calls are the kernel-name sequence's period."""
    if calls is None:
        period = _period(g.kname)
        n = len(g) // period
        cs, ce = g.start.reshape(n, period).min(1), g.end.reshape(n, period).max(1)
    else:
        u, inv = np.unique(calls, return_inverse=True)
        n = len(u)
        cs = np.full(n, np.iinfo(np.int64).max, dtype=np.int64)
        ce = np.full(n, np.iinfo(np.int64).min, dtype=np.int64)
        np.minimum.at(cs, inv, g.start)
        np.maximum.at(ce, inv, g.end)
    rs, re_ = union_arrays(cs, ce)
    window = float(int((re_ - rs).sum()))
    gaps = minus_arrays(rs, re_, bs, be)
    idle = float(int(gaps[gaps < LAUNCH_GAP_NS].sum()))  # longer gaps: host work, not launches
    rec = max(0.0, idle - len(g) * gap)
    if not window or rec <= 0:
        return None
    busy = window - int(gaps.sum())
    host = window - busy - idle
    it = Item(
        "graph",
        path,
        _names(g),
        "launch_overhead",
        n,
        len(g),
        float(int(g.dur.sum())),
        window,
        rec,
        (window - rec) / n,
        (
            f"idle {idle / n / 1e3:,.1f} us of a {window / n / 1e3:,.1f} us window per call "
            f"({100 * idle / window:.0f} %, gaps under {LAUNCH_GAP_NS / 1e6:.0f} ms; {host / n / 1e3:,.1f} us "
            f"in longer gaps count as host work) - {len(g) / n:.0f} kernels x the device's own gap "
            f"{gap / 1e3:.2f} us, x {n} calls (a timeline without counters: its kernels' own floors are not known)"
        ),
        (
            f"the GPU idles {100 * idle / window:.0f} % of this range between launches: CUDA-graph it or fuse "
            f"its kernels"
        ),
        [
            {
                "calls": n,
                "window_us_per_call": window / n / 1e3,
                "busy_us_per_call": busy / n / 1e3,
                "idle_us_per_call": idle / n / 1e3,
                "host_us_per_call": host / n / 1e3,
                "device_gap_us": gap / 1e3,
            }
        ],
        family=_family_of(g),
    )
    it.predicted_speedup, it.predicted_how = it.roof_speedup, "the idle time, less the device's own gap per kernel"
    return it


def _sms(c0: dict | None):
    """The SM count of the first launch with counters."""
    return lookup(c0, "sm_count") if c0 else None


def _grid(g: _Launches) -> int | None:
    return int(g.grid.max()) if len(g) else None


def _predict(
    it: Item,
    what: str,
    sms,
    grid: int | None,
    measured,
    dram: float | None,
    around: tuple[float, str] | None = None,
) -> None:
    """predicted_speedup: the headroom to the roof (roof_speedup) times the attainable efficiency
    of the item's family (profkit.model.attainable: estimates, to be calibrated), bounded by
    ncu's own estimate where the report carries one (for a kernel's own fix, not a fusion)."""
    roof = it.roof_speedup
    if roof is None:
        if it.ncu_speedup_pct is not None and 0 < it.ncu_speedup_pct < 100 and what in ("kernels", "item"):
            # no roofline floor: ncu's own estimate is the one figure there is
            it.predicted_speedup = 1.0 / (1.0 - it.ncu_speedup_pct / 100.0)
            it.predicted_how = f"ncu's own estimate {it.ncu_speedup_pct:.0f} % (no roofline floor)"
            it.recoverable_ns = it.gpu_ns * it.ncu_speedup_pct / 100.0
        return
    fam = families.get(it.family)
    small = bool(sms and grid and grid < sms)
    att = attainable.of("code" if what in ("operator", "chain") else fam.attain, small=small)
    eff, why = att.efficiency, f"{att.efficiency:.0%} of {att.of} ({att.provenance}: {att.source})"
    if what in ("operator", "chain") and ("measured copy bandwidth" in it.how or "(measured)" in it.how):
        eff, why = 1.0, "the floor is at a measured peak (copy bandwidth, FLOP rate): already what a kernel attains"
    pred = max(1.0, roof * eff)
    hows = [why]
    if around is not None and around[0] > 0:
        # a chain with library GEMMs: the fusion a user can apply leaves the GEMMs whole
        pred, hows = max(1.0, min(pred, it.per_call_ns / around[0])), [around[1]]
    if it.ncu_speedup_pct is not None and what in ("kernels", "item") and 0 < it.ncu_speedup_pct < 100:
        bound = 1.0 / (1.0 - it.ncu_speedup_pct / 100.0)
        if bound < pred:
            pred, hows = bound, hows + [f"ncu's own estimate {it.ncu_speedup_pct:.0f} % -> {bound:.2f}x"]
    it.predicted_speedup, it.predicted_how = pred, "; ".join(hows)
    it.roof_recoverable_ns = it.recoverable_ns
    per_call = it.per_call_ns
    it.recoverable_ns = max(0.0, per_call - per_call / pred) * it.calls


def _kernel_item(g: _Launches, rows_of, counters: dict, facts: Facts, rules: dict, own: set) -> Item:
    """One kernel (by name) outside any range: each launch at its own roofline. Launches ncu
    did not measure take the measured fraction of launches of the same kernel and grid."""
    fractions: dict[tuple, list[float]] = defaultdict(list)
    has_c = _with_counters(g, counters)
    ks = rows_of(np.arange(len(g))) if has_c.any() else []  # without counters there is no fraction to take
    for k in ks:
        c = counters.get(k["kernel_id"])
        r = roof_time_ns(c) if c else None
        d = lookup(c, "duration") if c else None
        if r and d:
            fractions[_config(k)].append(min(1.0, r[0] / d))
    rec, measured, sampled, borrowed = 0.0, 0, 0, 0
    for k in ks:
        f = fractions.get(_config(k))
        if not f:
            continue
        c = counters.get(k["kernel_id"])
        r = roof_time_ns(c) if c else None
        d = lookup(c, "duration") if c else None
        if r and d:
            if k["kernel_id"] in own:
                measured += 1
            else:
                sampled += 1
            rec += max(0.0, k["duration_ns"] * (1 - min(1.0, r[0] / d)))
        else:
            borrowed += 1
            rec += k["duration_ns"] * (1 - statistics.median(f))
    gpu_ns = float(int(g.dur.sum()))
    judged = np.flatnonzero(has_c) if has_c.any() else np.arange(len(g))  # as in _range_item
    label = _label_of(g, judged, facts)
    rule, reason = _rule_of(g, judged, facts, label)
    fam = _family_of(g)
    c0 = counters[int(g.kid[judged[0]])] if has_c.any() else None
    dram = _dram_pct(g.kid[has_c].tolist(), counters)
    known = measured + sampled + borrowed
    if known:
        how = (
            f"{known} of {len(g)} launches at their own roofline (report peaks at each kernel's clocks): "
            f"{measured} measured by ncu"
            + (
                f", {sampled} through the measured launch of their kernel and configuration (sampled_from)"
                if sampled
                else ""
            )
            + (f", {borrowed} take the measured fraction of the same kernel and grid" if borrowed else "")
        )
        floor = (gpu_ns - rec) / len(g)
        action = _step(label, rule, reason, fam, c0, dram)
    elif c0:  # counters, but none gives a roofline time (a peak or the DRAM bytes are missing)
        how, floor = (
            (
                "no roofline floor: the counters lack a peak or the DRAM bytes of the work they count "
                "(profkit roofline says which)"
            ),
            None,
        )
        action = ACTIONS["no_floor"].format(
            step=_step(label, rule, reason, fam, c0, dram), why="a peak or the DRAM bytes are missing"
        )
    else:
        how, floor, action = "no counters for these launches", None, ACTIONS["unmeasured" if counters else "unknown"]
    ncu = _ncu_max(g.kid, rules)
    names = _names(g)
    evidence = [
        {
            "kernel": names,
            "launches": len(g),
            "measured_launches": measured,
            "borrowed": borrowed,
            "gpu_us": gpu_ns / 1e3,
            "label": label,
            "ncu_speedup_pct": ncu,
        }
    ]
    window = None
    it = Item(
        "range",
        None,
        names,
        label,
        len(g),
        len(g),
        gpu_ns,
        window,
        rec,
        floor,
        how,
        action,
        evidence,
        ncu,
        family=fam,
    )
    _predict(it, "item", _sms(c0), _grid(g), None, dram)
    return it


def _config(k: dict) -> tuple:
    return (
        k["short_name"] or k["kernel_name"],
        k["grid_x"],
        k["grid_y"],
        k["grid_z"],
        k["block_x"],
        k["block_y"],
        k["block_z"],
    )


def _idle_step(graphed: bool) -> str | None:
    """The launch-gap item's next step where the launches are replayed from CUDA graphs already
    (fuse, or more work per replay). None: the default step (CUDA graphs). The idle time of other
    causes is an item of its own (profkit.analyses.idle_advice)."""
    if not graphed:
        return None
    return (
        "the GPU waits between CUDA graph replays (the host prepares each step): move the work between "
        "replays into the graph (sampling, copies), or more work per replay (batch)"
    )


def _launch_gap_item(ks: _Launches, gap: float, step: str | None = None) -> list[Item]:
    """Without repeated call ranges (an unannotated program): the GPU's idle time between its
    kernels, where the gap is short enough to be the next launch (under LAUNCH_GAP_NS)."""
    t = ks.timed()
    bs, be = union_arrays(ks.start[t], ks.end[t])
    if len(bs) < 2:
        return []
    all_gaps = bs[1:] - be[:-1]
    gaps, short = int(all_gaps.sum()), all_gaps[all_gaps < LAUNCH_GAP_NS]
    # (summed in order as Python numbers: the figure does not move with numpy's pairwise sum)
    d = short - gap
    rec = sum(d[d > 0].tolist()) + (0.0 if (d <= 0).any() else 0)  # as sum(max(0.0, g - gap)) would
    if rec <= 0:
        return []
    window = float(int(be[-1] - bs[0]))
    return [
        Item(
            "graph",
            None,
            f"{int(t.sum()):,} launches",
            "launch_overhead",
            1,
            int(t.sum()),
            float(int((be - bs).sum())),
            window,
            rec,
            window - rec,
            (
                f"{len(short):,} gaps under {LAUNCH_GAP_NS / 1e6:.0f} ms between the GPU's kernels add up to "
                f"{int(short.sum()) / 1e3:,.1f} us; less the device's own gap {gap / 1e3:.2f} us each (longer gaps, "
                f"{len(all_gaps) - len(short):,} of them, count as host work)"
            ),
            step
            or (
                "the GPU waits for launches between its kernels: capture the repeated work (a training or decode "
                "step) in a CUDA graph (torch.compile mode='reduce-overhead', or torch.cuda.graphs), or fuse the "
                "small kernels; mark the step with NVTX (profkit capture --step) to see it per step"
            ),
            [
                {
                    "gaps": len(all_gaps),
                    "short_gaps": len(short),
                    "idle_short_us": int(short.sum()) / 1e3,
                    "idle_long_us": (gaps - int(short.sum())) / 1e3,
                    "device_gap_us": gap / 1e3,
                }
            ],
        )
    ]


def _ranges(path: str, run: str, scope: str | None, win) -> list[dict]:
    """timeline.ranges on a connection of its own: read beside advise's own reading (SQLite
    steps through rows without Python's lock, so the two share the cores)."""
    with Store(path, readonly=True) as s:
        return tl.ranges(s, run, scope, window=win)


def _graph_items(rows: list[dict], scope: str | None, gap: float) -> list[Item]:
    out = []
    # the repeated unit: a call range inside a range pushed once, or the scope itself when it repeats
    calls = tl.calls(rows) + [r for r in rows if r["path"] == scope and r["instances"] > 1 and r not in tl.calls(rows)]
    for r in calls:
        n, kernels = r["instances"], r["kernels"]
        if r["launch_calls"] <= GRAPHED_CALLS_PER_KERNEL * kernels:
            continue  # already replayed from a graph
        residual = kernels * gap
        rec = max(0.0, r["idle_ns"] - residual)
        if rec <= 0:
            continue
        floor = (r["busy_ns"] + residual) / n
        out.append(
            Item(
                "graph",
                r["path"],
                f"{kernels / n:.0f} kernels per call",
                "launch_overhead",
                n,
                kernels,
                float(r["kernel_ns"]),
                float(r["window_ns"]),
                rec,
                floor,
                (
                    f"idle {r['idle_ns'] / n / 1e3:,.1f} us of a {r['window_ns'] / n / 1e3:,.1f} us window per call "
                    f"({r['idle_pct']:.0f} %) - {kernels / n:.0f} kernels x the device's own gap {gap / 1e3:.2f} us, "
                    f"x {n} calls"
                ),
                (
                    f"CUDA-graph each call ({r['launch_calls'] / n:.0f} launch calls per call today) or fuse its kernels: "
                    f"the GPU waits for the CPU to launch"
                ),
                [
                    {
                        "calls": n,
                        "kernels_per_call": kernels / n,
                        "launch_calls_per_call": r["launch_calls"] / n,
                        "window_us_per_call": r["window_ns"] / n / 1e3,
                        "busy_us_per_call": r["busy_ns"] / n / 1e3,
                        "idle_us_per_call": r["idle_ns"] / n / 1e3,
                        "device_gap_us": gap / 1e3,
                    }
                ],
            )
        )
    return out


# SDPA's backends as torch.nn.attention.SDPBackend names them
SDPA_BACKENDS = {"cudnn": "CUDNN_ATTENTION", "flash": "FLASH_ATTENTION", "efficient": "EFFICIENT_ATTENTION"}


def _switch_items(store: Store, ks: _Launches, facts: Facts) -> list[Item]:
    """Attention in pieces (SDPA's math backend, or written by hand), one item per range (its
    step-free path): the time a fused backend would take, from the measured math/fused ratio."""

    def grid_z(pos):
        ids = ks.kid[pos].tolist()
        got = dict(
            store.conn.execute(
                "SELECT id, grid_z FROM launch_row WHERE id IN (SELECT value FROM json_each(?))", (json.dumps(ids),)
            )
        )
        return [got.get(i) or 1 for i in ids]

    blocks = unfused_attention.find(ks.names, ks.kname, ks.family, ks.families, ks.stream, ks.dur, grid_z)
    by_path: dict[str, list[unfused_attention.Block]] = defaultdict(list)
    for b in blocks:
        p = ks.path_of(int(b.ix[0]))
        by_path[_step_free(p) if p else ""].append(b)
    out = []
    for path, bs in by_path.items():
        sw = unfused_attention.predict(bs)
        if sw is None or sw.fused_ns >= sw.pieces_ns:
            continue
        ix = np.concatenate([b.ix for b in bs])
        g = ks.take(ix)
        calls = sum(b.pass_ == "fwd" for b in bs) or len(bs)
        passes = " + ".join(p for p in ("fwd", "bwd") if any(b.pass_ == p for b in bs))
        top = [ks.names[c] for c, _ in _top_names(g)][:3]
        backend = SDPA_BACKENDS.get(sw.backend, sw.backend)
        it = Item(
            "switch",
            path or None,
            f"attention in pieces ({passes}, {len(ix) / calls:.0f} launches a call): {', '.join(top)}",
            _label_of(g, np.arange(len(g)), facts),
            calls,
            len(ix),
            sw.pieces_ns,
            None,
            sw.pieces_ns - sw.fused_ns,
            sw.fused_ns / calls,
            f"batched GEMMs around a softmax, {len(bs)} passes (B x H {bs[0].batch}): {sw.how}",
            (
                f"run it as one fused attention: F.scaled_dot_product_attention on a fused backend "
                f"(torch.nn.attention.sdpa_kernel(SDPBackend.{backend}) measured fastest here); SDPA falls back "
                f"to math when forced or when the fused backends refuse the inputs (an explicit float mask, "
                f"fp32, an unsupported head size): hand-written softmax(Q K^T) V: call SDPA"
            ),
            [
                {
                    "passes": len(bs),
                    "batch_heads": bs[0].batch,
                    "seq_bound": bs[0].seq,
                    "pieces_us_per_call": sw.pieces_ns / calls / 1e3,
                    "fused_us_per_call": sw.fused_ns / calls / 1e3,
                    "backend": sw.backend,
                }
            ],
            family="cudnn_attention" if sw.backend == "cudnn" else "flash_attention",
        )
        it.predicted_speedup, it.predicted_how = it.roof_speedup, f"measured: {sw.how}"
        out.append(it)
    return out


def _top_names(g: _Launches) -> list[tuple[int, int]]:
    """(name code, time) of a group's kernels, most time first."""
    t: dict[int, int] = defaultdict(int)
    for c, d in zip(g.name.tolist(), g.dur.tolist()):
        t[c] += d
    return sorted(t.items(), key=lambda kv: -kv[1])


# what advise does, in order (its progress)
STEPS = ("reading launches", "reading labels", "operators", "idle time")


def advise(
    store: Store,
    run: str | None = None,
    scope: str | None = None,
    peaks: list[dict] | None = None,
    include_unranged: bool = False,
    phase: str | None = None,
    step=None,
) -> Advice:
    """The ranked items of a run, or of the ranges under `scope` (an NVTX path).
    `peaks`: measured peak records (profkit.model.peaks) of the run's GPU, if any. A run with NVTX
    ranges is advised on the launches inside them unless `include_unranged`. `phase`: the steady
    state by default where one is found (profkit.analyses.phases), 'all', or a phase's name.
    `step(what)`: called as each of STEPS begins (a progress bar)."""
    step = step or (lambda what: None)
    run = store.require_run(run)
    # the range table (graph items) is read beside the rest where another connection sees what
    # this one does: a database file, nothing uncommitted, nothing written here (that connection
    # reads through ADBC: Store.int_columns says why not after a write)
    aside = store.path != ":memory:" and not store.conn.in_transaction and not store.conn.total_changes
    with ThreadPoolExecutor(1) if aside else contextlib.nullcontext() as pool:
        return _advise(store, run, scope, peaks, include_unranged, phase, step, pool)


def _advise(store: Store, run: str, scope, peaks, include_unranged: bool, phase, step, pool) -> Advice:
    step(STEPS[0])
    # a scope names the ranges asked about: the steady-state default applies to the whole run only
    win, phase_line = (None, "") if scope and phase is None else phases.selected(store, run, phase)
    later = pool.submit(_ranges, store.path, run, scope, win) if pool else None
    ks = every = _without_operator_ranges(store, run, _keep(_read(store, run, scope), win))
    notes = [phase_line] if phase_line else []
    ranged = ks.ranged()
    if scope is None and not include_unranged and ranged.any():
        outside = ~ranged
        if outside.any():
            share = int(ks.dur[outside].sum()) / (int(ks.dur.sum()) or 1)
            notes.append(
                f"{int(outside.sum()):,} launches ({100 * share:.0f} % of GPU time) outside any NVTX range left out "
                f"(warm-up, set-up or unannotated code; --all includes them)"
            )
        ks = ks.take(ranged)
        ranged = ranged[ranged]
    if not len(ks):
        where = f"under the NVTX path {scope!r}" if scope else "with a duration"
        raise BadArgument(f"run {run!r} has no kernels {where}")
    meta = _meta(store, run)
    gpu = meta.get("gpu_name")
    counters = store.counters(run)
    own = set(store.counters(run, ["gpu__time_duration.sum"], sampled=False))
    step(STEPS[1])
    facts = label_facts(store, run, set(counters))
    rules = _rules(store, run)
    gap, gap_how = device_gap(ks)
    shapes = fusion.ops_of(store, run)  # operators with recorded shapes: the fusion floor
    # one item per operator: the innermost range that launched kernels (per kernel name outside ranges)
    step(STEPS[2])
    keys: dict = {}
    free = [keys.setdefault(_step_free(p), len(keys)) if p else -1 for p in ks.paths]
    key = np.array(free + [-1], dtype=np.int64)[ks.path]
    outside = np.array([keys.setdefault(("", n), len(keys)) for n in ks.names], dtype=np.int64)
    key[~ranged] = outside[ks.name[~ranged]]
    of = list(keys)
    items = []
    split: list[str] = []  # ranges listed by their kernels
    for code, members in _groups(key):
        g = ks.take(members)

        def rows_of(ix, g=g):
            return _rows(store, g, ix)

        if isinstance(of[code], str):
            it = _range_item(of[code], g, rows_of, counters, facts, meta, peaks, gpu, rules, own, shapes)
            if it.floor_ns is None and _with_counters(g, counters).any() and len(np.unique(g.name)) > 1:
                # a range with no floor as a whole (a training step holding hundreds of kernels, some
                # not measured): its kernels are the items, each at its own roofline, as outside ranges
                split.append(of[code])
                for _, sub in _groups(g.name):
                    h = g.take(sub)
                    items.append(_kernel_item(h, functools.partial(_rows, store, h), counters, facts, rules, own))
                    items[-1].nvtx_path = of[code]
            else:
                items.append(it)
        else:
            items.append(_kernel_item(g, rows_of, counters, facts, rules, own))
    items += _switch_items(store, ks, facts)
    if split:
        notes.append(
            f"{', '.join(split[:3])}{' ...' if len(split) > 3 else ''}: no floor for the range as a whole "
            f"(ncu measured some of its kernels): its kernels are listed each at its own roofline"
        )
    step(STEPS[3])
    if ks.has_start.any():
        rows = later.result() if later else tl.ranges(store, run, scope, window=win)
        graphs = _graph_items(rows, scope, gap)
        if not graphs and ranged.any():
            # no repeated call range (torch.profiler's ProfilerStep#N are all different): the
            # idle time of each outermost range is its item
            graphs = _idle_items(ks, every, scope, gap)
        # an unannotated program has no repeated call to graph: its launch gaps are the item
        graphed = "cuda_graph" in {ks.families[f] for f in np.unique(ks.family).tolist()}
        items += graphs or ([] if ranged.any() else _launch_gap_item(ks, gap, _idle_step(graphed)))
        from profkit.analyses import idle_advice

        items += idle_advice.split(store, run, win, every, items, gap)
    else:
        notes.append("no timeline in this run: idle time and launch overhead are not known (counters only)")
    if not counters:
        notes.append("no Nsight Compute counters in this run: only timeline items (idle between launches)")
    gpu_total = float(int(ks.dur.sum()))
    timed = ks.timed()
    wall = float(int(ks.end[timed].max() - ks.start[timed].min())) if timed.any() else None
    if wall is not None:
        bs, be = union_arrays(ks.start[timed], ks.end[timed])
        idle = wall - int((be - bs).sum())
    else:
        idle = None
    for it in items:
        it.share_gpu = it.gpu_ns / gpu_total if gpu_total else 0.0
        it.share_wall = (it.window_ns / wall) if wall and it.window_ns is not None else None
    for it in items:
        if it.predicted_speedup is None and it.roof_speedup is not None:  # graph items: the idle time is the gain
            it.predicted_speedup, it.predicted_how = it.roof_speedup, "the idle time, less the device's own gap"
        if not it.roof_recoverable_ns:
            it.roof_recoverable_ns = it.recoverable_ns
    items = [i for i in items if i.recoverable_ns > 0 or i.floor_ns is None]
    # ranked by the attainable gain; an item predicted under MIN_SPEEDUP never ranks above one
    # predicted at or above it
    # module loading and JIT are paid once per process, not by every further call: they rank after
    # the recurring work, like an item under MIN_SPEEDUP
    items.sort(
        key=lambda i: (
            2 if i.predicted_speedup is None else int(i.predicted_speedup < MIN_SPEEDUP or i.label in ONE_TIME),
            -i.recoverable_ns,
            -i.gpu_ns,
        )
    )
    for n, it in enumerate(items, 1):
        it.rank = n
    return Advice(run, scope, gpu_total, wall, idle, items, gap, gap_how, notes)


def rows(a: Advice) -> list[dict]:
    """The `advice` table's rows of one advise run."""
    return [
        {
            "run": a.run,
            "rank": i.rank,
            "scope": a.scope or "",
            "kind": i.kind,
            "nvtx_path": i.nvtx_path,
            "kernel_name": i.kernel_name,
            "label": i.label,
            "share": i.share_gpu,
            "share_wall": i.share_wall,
            "recoverable_ns": i.recoverable_ns,
            "action": i.action,
            "how": i.how,
            "evidence": json.dumps(
                {
                    "evidence": i.evidence,
                    "floor_ns": i.floor_ns,
                    "calls": i.calls,
                    "launches": i.launches,
                    "gpu_ns": i.gpu_ns,
                    "window_ns": i.window_ns,
                    "ncu_speedup_pct": i.ncu_speedup_pct,
                    "roof_speedup": i.roof_speedup,
                    "predicted_speedup": i.predicted_speedup,
                    "predicted_how": i.predicted_how,
                    "family": i.family,
                    "roof_recoverable_ns": i.roof_recoverable_ns,
                },
                sort_keys=True,
                default=str,
            ),
        }
        for i in a.items
    ]
