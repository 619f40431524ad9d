"""Phases of a run: start-up, compile/autotune, warm-up, the repeated steps, and later phases.

Most of a real program's GPU time before its steady state is not the program's: torch.compile's
autotuning benchmarks each candidate kernel dozens of times, lazy module loading and the first
step's allocations stretch step 1. An answer about the whole run mixes them in, so analyses take
the steady state by default (`phase_window`), and say what they left out.

How a phase is found, in this order (the `how` column says which):
- steps: ranges named like steps (`step 3`, `ProfilerStep#3`, `iteration 3`: core.steps.STEP_RE).
  Steps whose time stays within STEADY_SPREAD of the later steps' median are the steady state;
  the leading ones that do not are warm-up.
- else the periodic kernel sequence: the launch sequence (kernel names in launch order) that
  repeats with a fixed period over the longest stretch. Candidate periods are the gaps between
  successive launches of each kernel name; a period scores by the longest stretch in which
  launch i and launch i+period run the same kernel (MATCH of a sliding window); a period whose
  stretch is within 5 % of the best and shorter wins (twice a period repeats as well). A step
  starts at the launch where the host's gap before it is largest on average (the loop's top).
  The repeated phase with most GPU time is the steady state; others (a decode after training,
  an evaluation) are phases of their own.
- compile/autotune: ranges of Inductor's and Triton's autotuners where the trace has them;
  without them, bursts where one kernel runs AUTOTUNE_REPEATS or more times in a row under
  several launch configurations (block, registers, shared memory), or between cache-clearing
  fills (a benchmark loop's signature).

Phases are contiguous slices of the run's timeline launches in GPU start order; each keeps the
GPU window [start_ns, end_ns) that the analyses filter on. Everything is column-at-a-time (numpy).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

import numpy as np

from profkit.core.errors import BadArgument
from profkit.core.steps import STEP_RE
from profkit.store.store import Store, lab_op

STEADY_SPREAD = 1.5  # a step slower than this x the later steps' median is warm-up
MATCH = 0.8  # share of launches that must repeat one period later
MIN_REPS = 3  # repetitions before a sequence counts as repeated
MIN_PERIOD = 2  # launches a repeated unit holds at least
MAX_CANDIDATES = 40  # periods tried per segment
INNER = 0.25  # a repeated unit shorter than this x the steps' unit ...
MOST = 0.6  # ... that covers less than this share of its slice is no phase
AUTOTUNE_REPEATS = 5
MAX_PHASES = 5  # repeated phases found at most (steady state included)
AUTOTUNE_RANGE = re.compile(
    r"benchmark_all_configs|autotun|CachingAutotuner|compile_fx|_compile\.|"
    r"TorchDynamo|Dynamo|inductor",
    re.I,
)
FILL = re.compile(r"FillFunctor|fill_kernel|zero_", re.I)
STEADY = "steady"  # the --phase value of the steady state
ALL = "all"


@dataclass
class Phase:
    name: str  # startup | compile | warm-up | steps | repeated N | after
    kind: str  # startup | compile | warmup | steps | repeated | after | whole
    start_ns: int  # GPU window: first launch's start ..
    end_ns: int  # .. the next phase's first start (the last launch's end for the last phase)
    first: int  # launch indexes in GPU start order, [first, last)
    last: int
    launches: int
    gpu_ns: float  # kernel time (sum of durations)
    steps: int | None  # repetitions, for step phases
    step_ns: float | None  # median window per step
    step_spread_ns: float | None  # spread (median absolute deviation) of the step windows
    how: str

    def row(self) -> dict:
        return asdict(self)


@dataclass
class Phases:
    run: str
    phases: list[Phase]
    note: str  # one line: what was found, or why nothing was

    @property
    def steady(self) -> Phase | None:
        steps = [p for p in self.phases if p.kind == "steps"]
        return max(steps, key=lambda p: p.gpu_ns) if steps else None

    def find(self, name: str) -> Phase:
        for p in self.phases:
            if p.name == name:
                return p
        raise BadArgument(
            f"no phase {name!r} in run {self.run!r} (phases: "
            f"{', '.join(p.name for p in self.phases) or 'none'}; or 'all')"
        )


# --- reading ---------------------------------------------------------------------------------


def _timeline(store: Store, run: str) -> dict[str, np.ndarray] | None:
    src = store.timeline_source(run)
    if not src:
        return None
    rank = store.query("SELECT min(rank) AS r FROM launch WHERE run = ? AND source = ?", (run, src))[0]["r"]
    # launch_row with its name ids, not the launch view: the view looks each row's names up
    cur = store.conn.execute(
        "SELECT start_ns, end_ns, coalesce(api_start_ns, start_ns), short_id, name_id, "
        "coalesce(block_x, 0) * 65536 + coalesce(registers_per_thread, 0) * 4 "
        "+ coalesce(shared_mem_dynamic, 0) * 1000003, coalesce(path_id, -1) "
        "FROM launch_row WHERE run = ? AND source = ? AND timeline_id IS NULL AND start_ns IS NOT NULL "
        "AND end_ns IS NOT NULL AND rank IS ? ORDER BY start_ns, id",
        (run, src, rank),
    )
    rows = cur.fetchall()
    if not rows:
        return None
    start, end, api, short, name, config, path = zip(*rows)
    text = dict(store.conn.execute("SELECT id, name FROM launch_name"))
    text[None] = None
    # names to ids by hashing (np.unique sorts the long name strings: 23 s of 24 at 600 k launches);
    # a name id stands for its name (launch_name holds each name once)
    index: dict = {}
    ids = np.fromiter((index.setdefault(n, len(index)) for n in name), np.int64, len(name))
    names = np.array([str(text[n]) for n in index], dtype=object)
    shorts = {n: text[n] for n in set(short)}
    return {
        "start": np.asarray(start, np.int64),
        "end": np.asarray(end, np.int64),
        "api": np.asarray(api, np.int64),
        "ids": ids,
        "names": names,
        "short": np.array([shorts[n] for n in short], dtype=object),
        "config": np.asarray(config, np.int64),
        "path": np.asarray(path, np.int64),
        "rank": rank,
    }


def _step_ranges(store: Store, run: str, rank) -> list[tuple[int, int, int]]:
    """(step number, host start, host end) of the ranges named like steps, outermost kind only."""
    rows = store.query(
        "SELECT text, start_ns, end_ns, depth FROM nvtx_range WHERE run = ? AND rank IS ? "
        "AND start_ns IS NOT NULL AND end_ns IS NOT NULL",
        (run, rank),
    )
    found = [
        (int(m.group(1)), r["start_ns"], r["end_ns"], r["depth"] or 0)
        for r in rows
        if r["text"] and (m := STEP_RE.match(r["text"].strip()))
    ]
    if not found:
        return []
    top = min(f[3] for f in found)  # torch.profiler's ProfilerStep#N around the program's own step N
    return sorted((n, s, e) for n, s, e, d in found if d == top)


def _autotune_ranges(store: Store, run: str, rank) -> list[tuple[int, int]]:
    rows = store.query(
        "SELECT text, start_ns, end_ns FROM nvtx_range WHERE run = ? AND rank IS ? "
        "AND start_ns IS NOT NULL AND end_ns IS NOT NULL",
        (run, rank),
    )
    return [(r["start_ns"], r["end_ns"]) for r in rows if r["text"] and AUTOTUNE_RANGE.search(r["text"])]


# --- the periodic sequence -------------------------------------------------------------------


def _candidates(ids: np.ndarray) -> np.ndarray:
    """Periods worth trying: the most frequent gaps between successive launches of one kernel."""
    order = np.lexsort((np.arange(len(ids)), ids))
    same = ids[order][1:] == ids[order][:-1]
    gaps = np.diff(order)[same]
    gaps = gaps[(gaps >= MIN_PERIOD) & (gaps <= len(ids) // MIN_REPS)]
    if not len(gaps):
        return gaps
    values, counts = np.unique(gaps, return_counts=True)
    return values[np.argsort(-counts, kind="stable")[:MAX_CANDIDATES]]


def _stretch(ids: np.ndarray, period: int) -> tuple[int, int]:
    """The longest run [a, b) of launches that repeat `period` launches later (and their partners)."""
    eq = (ids[:-period] == ids[period:]).astype(np.int32)
    if len(eq) < period:
        return 0, 0
    c = np.concatenate(([0], np.cumsum(eq)))
    win = (c[period:] - c[:-period]) >= MATCH * period  # window i..i+period mostly matches
    if not win.any():
        return 0, 0
    edges = np.flatnonzero(np.diff(np.concatenate(([0], win.astype(np.int8), [0]))))
    starts, stops = edges[::2], edges[1::2]
    k = int(np.argmax(stops - starts))
    a, b = int(starts[k]), int(stops[k]) + 2 * period - 1  # the last window's launches and their partners
    return a, min(b, len(ids))


def _periodic(ids: np.ndarray, gpu: np.ndarray | None = None) -> tuple[int, int, int] | None:
    """(period, first, last) of the best repeated stretch, or None. `gpu`: the cumulative
    kernel time before each launch (and after the last); the stretch with most GPU time is
    best then, else the longest: a CUDA graph replay is one launch holding a whole step."""
    best = None
    score = (lambda a, b: gpu[b] - gpu[a]) if gpu is not None else (lambda a, b: b - a)
    for p in _candidates(ids):
        a, b = _stretch(ids, int(p))
        if b - a >= MIN_REPS * p and (best is None or score(a, b) > score(best[1], best[2])):
            best = (int(p), a, b)
    if best is None:
        return None
    # a shorter period that repeats over (nearly) the same stretch is the unit (2 x a step repeats too)
    for p in sorted(int(x) for x in _candidates(ids)):
        if p < best[0] and best[0] % p == 0:
            a, b = _stretch(ids, p)
            if b - a >= 0.95 * (best[2] - best[1]):
                return p, a, b
    return best


def _align(t: dict, period: int, a: int, b: int) -> tuple[int, int]:
    """Step boundaries: the offset in the period where the host waits longest before a launch
    (the top of the loop), and the whole repetitions from there."""
    api = t["api"]
    gaps = np.diff(api[a:b].astype(np.float64), prepend=api[a])
    n = (b - a) // period * period
    offset = int(np.argmax(gaps[:n].reshape(-1, period).mean(axis=0))) if n else 0
    first = a + offset
    reps = (b - first) // period
    return first, first + reps * period


def _bursts(t: dict, lo: int, hi: int) -> list[tuple[int, int]]:
    """Launch slices [i, j) of autotuning: one kernel AUTOTUNE_REPEATS+ times in a row (fills
    between left out) under several launch configurations, or between cache-clearing fills."""
    idx = np.arange(lo, hi)
    fill: dict = {}  # (short name, name id) -> a fill? A run has a few hundred distinct kernels

    for i in range(lo, hi):
        key = (t["short"][i], t["ids"][i])
        if key not in fill:
            fill[key] = bool(FILL.search(str(key[0]) + " " + str(t["names"][key[1]])))
    is_fill = np.array([fill[t["short"][i], t["ids"][i]] for i in idx], dtype=bool) if hi > lo else np.zeros(0, bool)
    keep = idx[~is_fill]
    if len(keep) < AUTOTUNE_REPEATS:
        return []
    ids, cfg = t["ids"][keep], t["config"][keep]
    change = np.flatnonzero(np.diff(ids)) + 1
    starts = np.concatenate(([0], change))
    stops = np.concatenate((change, [len(ids)]))
    out = []
    for s, e in zip(starts, stops):
        if e - s < AUTOTUNE_REPEATS:
            continue
        fills = np.count_nonzero(is_fill[keep[s] - lo : keep[e - 1] - lo])
        if len(np.unique(cfg[s:e])) > 1 or fills >= e - s - 1:
            out.append((int(keep[s]), int(keep[e - 1]) + 1))
    return out


# --- the phases ------------------------------------------------------------------------------


def _phase(t: dict, name: str, kind: str, first: int, last: int, how: str, steps=None, bounds=None) -> Phase:
    start = int(t["start"][first])
    end = int(t["start"][last]) if last < len(t["start"]) else int(t["end"][first:last].max())
    step_ns = spread = None
    if bounds is not None and len(bounds) > 1:
        w = np.diff(np.asarray(bounds, np.float64))
        step_ns = float(np.median(w))
        spread = float(np.median(np.abs(w - step_ns)))
    gpu = float((t["end"][first:last] - t["start"][first:last]).sum())
    return Phase(name, kind, start, end, first, last, last - first, gpu, steps, step_ns, spread, how)


def _fill(t: dict, phases: list[Phase], autotune: list[tuple[int, int]]) -> list[Phase]:
    """Name the slices between the found phases: start-up / compile / warm-up before the first
    step phase, compile / after later on."""
    n = len(t["ids"])
    found = sorted(phases, key=lambda p: p.first)
    out: list[Phase] = []
    cursor = 0
    first_steps = next((p for p in found if p.kind == "steps"), None)
    for p in found + [None]:
        stop = p.first if p is not None else n
        if stop > cursor:
            before_steps = first_steps is not None and stop <= first_steps.first
            out.extend(_gap(t, cursor, stop, autotune, before_steps, first_steps is None))
        if p is not None:
            out.append(p)
            cursor = p.last
    return out


def _gap(t: dict, lo: int, hi: int, autotune, before_steps: bool, no_steps: bool) -> list[Phase]:
    bursts = [(i, j) for i, j in autotune if j > lo and i < hi]
    later = "startup" if (before_steps or no_steps) and lo == 0 else ("warm-up" if before_steps else "after")
    kind = {"warm-up": "warmup"}.get(later, later)
    if not bursts:
        return [_phase(t, later, kind, lo, hi, "launches outside the repeated phases")]
    a, b = max(lo, min(i for i, _ in bursts)), min(hi, max(j for _, j in bursts))
    out = []
    if a > lo:
        out.append(_phase(t, later, kind, lo, a, "launches before the first autotuning burst"))
    n = sum(min(j, hi) - max(i, lo) for i, j in bursts)
    out.append(_phase(t, "compile", "compile", a, b, f"{len(bursts)} autotuning bursts ({n} launches)"))
    if b < hi:
        tail = "warm-up" if before_steps else "after"
        out.append(_phase(t, tail, {"warm-up": "warmup"}.get(tail, tail), b, hi, "launches after the autotuning"))
    return out


def _autotune_slices(t: dict, ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out = []
    api = np.maximum.accumulate(t["api"])
    for s, e in ranges:
        i, j = int(np.searchsorted(api, s, "left")), int(np.searchsorted(api, e, "right"))
        if j > i:
            out.append((i, j))
    return out


def _outside(n: int, slices: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The launch slices of [0, n) outside `slices`, long enough to hold a repeated unit."""
    out, cursor = [], 0
    for i, j in sorted(slices) + [(n, n)]:
        if i > cursor:
            out.append((cursor, i))
        cursor = max(cursor, j)
    return [(a, b) for a, b in out if b - a >= MIN_REPS * MIN_PERIOD]


def _from_step_ranges(t: dict, steps: list[tuple[int, int, int]]) -> tuple[list[Phase], str] | None:
    api = np.maximum.accumulate(t["api"])  # launch order on the host, nearly GPU order already
    bounds = [(n, int(np.searchsorted(api, s, "left")), int(np.searchsorted(api, e, "right"))) for n, s, e in steps]
    bounds = [b for b in bounds if b[2] > b[1]]
    if len(bounds) < 2:
        return None
    # GPU windows per step: from its first launch to the next step's first launch
    firsts = [b[1] for b in bounds]
    spans = np.diff(np.append(t["start"][firsts], t["end"][bounds[-1][1] : bounds[-1][2]].max()))
    later = np.median(spans[len(spans) // 2 :])
    k = 0
    while k < len(spans) - 1 and spans[k] > STEADY_SPREAD * later:
        k += 1
    kept = bounds[k:]
    first, last = kept[0][1], kept[-1][2]
    edges = [int(t["start"][b[1]]) for b in kept] + [int(t["end"][kept[-1][1] : kept[-1][2]].max())]
    name = f"steps {kept[0][0]}-{kept[-1][0]}" if len(kept) > 1 else f"step {kept[0][0]}"
    how = f"ranges named like steps ({len(bounds)} with kernels); " + (
        f"the first {k} slower than {STEADY_SPREAD}x the later steps' median: warm-up" if k else "all steady"
    )
    ph = _phase(t, "steps", "steps", first, last, how, steps=len(kept), bounds=edges)
    if not k:
        return [ph], name
    warm = _phase(
        t,
        "warm-up",
        "warmup",
        bounds[0][1],
        first,
        ("step " if k == 1 else f"steps {bounds[0][0]}-") + f"{bounds[k - 1][0]}, slower "
        f"than {STEADY_SPREAD}x the later steps' median",
        steps=k,
    )
    return [warm, ph], name


def detect(store: Store, run: str | None = None) -> Phases:
    """The phases of a run's timeline (the lowest rank's, for a multi-process run)."""
    run = store.require_run(run)
    if lab_op(store.run_meta(run)):
        return Phases(run, [], "a lab workload: its ranges (operator/variant/shape) are its structure; analysed whole")
    t = _timeline(store, run)
    if t is None:
        return Phases(run, [], "no timeline: phases need launch times (nsys, CUPTI or torch.profiler)")
    n = len(t["ids"])
    autotune = _autotune_slices(t, _autotune_ranges(store, run, t["rank"]))
    steps = _step_ranges(store, run, t["rank"])
    found: list[Phase] = []
    note = ""
    if steps:
        from_ranges = _from_step_ranges(t, steps)
        if from_ranges:
            found, label = from_ranges
            note = f"{label} of {len(steps)} (ranges named like steps)"
    if not found:
        # the autotuners benchmark each candidate kernel in a loop: periodic, and never the steps
        segments = _outside(n, autotune)
        cum = np.concatenate(([0], np.cumsum(t["end"] - t["start"])))
        units: dict[int, tuple[int, float]] = {}
        top: Phase | None = None
        tries = 0
        while len(found) < MAX_PHASES and tries < 4 * MAX_PHASES:
            tries += 1
            best: tuple[int, int, int, int, int] | None = None
            for lo, hi in segments:
                rep = _periodic(t["ids"][lo:hi], cum[lo : hi + 1] - cum[lo])
                if rep and (best is None or cum[rep[2] + lo] - cum[rep[1] + lo] > cum[best[3]] - cum[best[2]]):
                    best = (lo, hi, rep[1] + lo, rep[2] + lo, rep[0])
            if best is None:
                break
            lo, hi, a, b, period = best
            first, last = _align(t, period, a, b)
            reps = (last - first) // period
            segments.remove((lo, hi))
            if reps < MIN_REPS - 1:
                continue
            # the rest of the slice is searched on whether or not this stretch is a phase: a
            # short unit inside one forward must not hide the decode loop beside it
            segments += [s for s in ((lo, first), (last, hi)) if s[1] - s[0] >= MIN_REPS * MIN_PERIOD]
            edges = [int(t["start"][i]) for i in range(first, last, period)] + [
                int(t["start"][last]) if last < n else int(t["end"][first:last].max())
            ]
            ph = _phase(
                t,
                "steps",
                "steps",
                first,
                last,
                f"periodic kernel sequence: {reps} repeats of {period} launches",
                steps=reps,
                bounds=edges,
            )
            cover = (last - first) / (hi - lo)
            # a short unit that repeats over part of a slice is inner structure (the layers of one
            # forward), not a phase: a later phase repeats a unit near the steps' own size, or
            # fills most of its slice (a decode loop after training). The first found is the
            # longest stretch; the filter compares each later one with it as it is found
            if top is not None and period < INNER * units[id(top)][0] and cover < MOST:
                continue
            found.append(ph)
            units[id(ph)] = (period, cover)
            if top is None:
                top = ph
        if found:
            top = max(found, key=lambda p: p.gpu_ns)
            for i, p in enumerate(sorted((p for p in found if p is not top), key=lambda p: p.first)):
                p.name, p.kind = f"repeated {i + 2}", "repeated"
            note = f"{top.steps} steps of {top.launches // max(top.steps or 1, 1)} launches (periodic kernel sequence)"
    if not autotune:
        autotune = []
        covered = sorted((p.first, p.last) for p in found)
        cursor = 0
        for lo, hi in covered + [(n, n)]:
            if lo > cursor:
                autotune += _bursts(t, cursor, lo)
            cursor = max(cursor, hi)
    phases = _fill(t, found, autotune)
    seen: dict[str, int] = {}
    for p in phases:  # names are what --phase takes: one each
        seen[p.name] = seen.get(p.name, 0) + 1
        if seen[p.name] > 1:
            p.name = f"{p.name} {seen[p.name]}"
    if not found:
        note = "no repeated steps found: analysed whole"
        if autotune:
            note += " (autotuning bursts are a phase of their own)"
    return Phases(run, phases, note)


def window(phases: Phases, phase: str | None) -> tuple[Phase | None, str]:
    """The phase an analysis reads (None: the whole run) and the one line that says so.
    `phase`: None or 'steady' (the steady state where found), 'all', or a phase's name."""
    if phase == ALL or not phases.phases:
        return None, "" if phase == ALL else (f"phases: {phases.note}" if phases.note else "")
    if phase in (None, STEADY):
        p = phases.steady
        if p is None:
            return None, f"phases: {phases.note}"
    else:
        p = phases.find(phase)
    left = [q for q in phases.phases if q is not p and q.launches]
    out = ", ".join(f"{q.name} {_dur(q.end_ns - q.start_ns)}" for q in left[:4])
    what = p.name
    if p.kind == "steps" and p.steps:
        what = f"steady state: {p.steps} steps" if p is phases.steady else f"{p.name}: {p.steps} repeats"
        if p.step_ns:
            what += f", {_dur(p.step_ns)} ± {_dur(p.step_spread_ns or 0)} per step"
    line = f"{what} ({p.how})"
    if out:
        line += f"; left out: {out}"
    return p, line + "; --phase all for everything"


def _dur(ns: float) -> str:
    if ns >= 1e9:
        return f"{ns / 1e9:.1f} s"
    if ns >= 1e6:
        return f"{ns / 1e6:.1f} ms"
    return f"{ns / 1e3:.0f} us"


def rows(phases: Phases) -> list[dict]:
    """The store's rows of a run's phases (Store.replace_phases)."""
    steady = phases.steady
    return [
        {
            "run": phases.run,
            "seq": i + 1,
            "name": p.name,
            "kind": p.kind,
            "start_ns": p.start_ns,
            "end_ns": p.end_ns,
            "launches": p.launches,
            "gpu_ns": p.gpu_ns,
            "steps": p.steps,
            "step_ns": p.step_ns,
            "step_spread_ns": p.step_spread_ns,
            "steady": int(p is steady),
            "how": p.how,
        }
        for i, p in enumerate(phases.phases)
    ]


def of_run(store: Store, run: str) -> Phases:
    """A run's phases: as stored at ingest, else found now (a database from before phases)."""
    try:
        got = store.query("SELECT * FROM phases WHERE run = ? ORDER BY seq", (run,))
    except Exception:  # noqa: BLE001 - a read-only database older than the phases view
        got = []
    if not got:
        return detect(store, run)
    ps = [
        Phase(
            r["phase"],
            r["kind"],
            r["start_ns"],
            r["end_ns"],
            -1,
            -1,
            r["launches"],
            r["gpu_ns"],
            r["steps"],
            r["step_ns"],
            r["step_spread_ns"],
            r["how"],
        )
        for r in got
    ]
    steady = next((p for p, r in zip(ps, got) if r["steady"]), None)
    note = f"{steady.steps} steps ({steady.how})" if steady else "no repeated steps found: analysed whole"
    out = Phases(run, ps, note)
    if steady is not None:  # the stored flag decides, not the GPU-time rule re-applied
        for p in ps:
            if p.kind == "steps" and p is not steady:
                p.kind = "repeated"
    return out


def selected(store: Store, run: str, phase: str | None) -> tuple[tuple[int, int] | None, str]:
    """The GPU window [start, end) an analysis keeps for `phase` (None: the whole run) and its line."""
    p, line = window(of_run(store, run), phase)
    return (None if p is None else (p.start_ns, p.end_ns)), line


def keep(rows_: list[dict], win: tuple[int, int] | None) -> list[dict]:
    """Launch rows inside a window (by GPU start); all of them without one."""
    if win is None:
        return rows_
    lo, hi = win
    return [r for r in rows_ if r.get("start_ns") is not None and lo <= r["start_ns"] < hi]
