"""Before/after per NVTX range: time per call, speed-up with its noise band, labels, % of
roofline, and a verdict in a kernel lab's terms (supported / caveated / rejected).

Method (docs/compare.md says the same for readers):
- A range's launches split into repeated calls (selection.iterations); a call's GPU time is
  the time its kernels kept the GPU busy: on a timeline, the union of their [start, end]
  intervals (kernels that overlap -- other streams, programmatic dependent launches -- count
  once; for kernels one after another it is the sum of their durations), else (ncu-only runs:
  each kernel replayed alone) the sum of their durations. Its span runs from its first
  kernel's start to its last kernel's end (idle gaps included; timeline runs only).
- A call's host time (timeline runs whose launches carry their API call's start): from the
  start of the API call that launched its first kernel to the same point of the next call, so
  a range of N calls gives N - 1 values. It is what the caller waits for a call where the GPU
  waits on the launcher (a host-bound call: the host time exceeds the span).
- Speed-up = median(before GPU time per call) / median(after); `by="host"`: of the host times
  instead (a change to the launcher moves no kernel). Noise band: with fewer than
  BOOTSTRAP_MIN_CALLS calls on a side, the full range min(before)/max(after) ..
  max(before)/min(after) -- every pairing of calls, no distribution assumed; from
  BOOTSTRAP_MIN_CALLS calls up, a percentile bootstrap (fixed seed) of the ratio of medians
  (past BOOTSTRAP_DRAWN calls, each resample's median drawn from its middle order statistics).
- Label of a side: the classify label holding most of its GPU time (computed, not stored,
  when the run has no labels yet).
- % of roofline of a side: sum over its kernels of the roofline's lower-bound time
  (profkit.model.perf.roof_time_ns: the slowest of each memory level's bytes at its peak and
  each precision's FLOPs at its peak) over the sum of their measured times (ncu's own
  duration, the one its counters were taken over).
- Verdict: `rejected` when the median speed-up is <= 1 or the after side failed its
  reference check; else `supported` when nothing is missing; else `caveated`, with each
  missing thing named: a band that reaches 1, a side with one call, no correctness record for
  the after side (run meta `correctness`, written by `profkit capture`), no counters.
"""

from __future__ import annotations

import copy
import json
import random
import statistics
from dataclasses import dataclass, field, fields

import numpy as np

from profkit.analyses import hotspots, selection
from profkit.analyses.classify import label_codes
from profkit.analyses.classify import labels as _labels
from profkit.core.columns import slice_covered, slice_max, slice_min
from profkit.core.dbfile import Pending
from profkit.core.errors import BadArgument
from profkit.core.intervals import covered
from profkit.core.metrics import lookup
from profkit.model.perf import roof_time_ns
from profkit.store.store import Store

BOOTSTRAP_MIN_CALLS = 10
BOOTSTRAP_SAMPLES = 2000
BOOTSTRAP_DRAWS = 1 << 22  # draws held at once (32 MB of doubles)
# above this many calls on both sides together, each resample's median is drawn from the calls
# near the middle (_bootstrap_ratios_many): drawing every call costs 2000 x the calls
BOOTSTRAP_DRAWN = 20_000
BAND_PERCENTILES = (2.5, 97.5)


@dataclass
class Side:
    run: str
    path: str
    calls: int
    kernels_per_call: int
    gpu_us: list[float]  # GPU time of each call
    span_us: list[float] | None  # first start to last end of each call (None: no timestamps)
    label: str | None  # dominant label by GPU time
    label_share: float | None  # its share of the side's GPU time
    labels: dict[str, float] = field(default_factory=dict)  # label -> GPU us (all calls)
    roofline_pct: float | None = None
    roof: str | None = None  # the ceiling that binds most of the time: dram, fp32, bf16_tensor, ...
    counters: bool = False  # every kernel of the side has counters
    dram_pct: float | None = None  # ncu DRAM throughput, % of peak, weighted by kernel time
    dram_bytes_per_call: float | None = None
    correctness: dict | None = None
    host_us: list[float] | None = None  # host time of each call but the last (None: no API times)
    hotspot: dict | None = None  # Source Counters: the top line of its most-sampled kernel, and its stall
    # median() per list: (the list, its length, its median)
    _medians: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    @property
    def median_us(self) -> float:
        return self.median("gpu_us")

    def median(self, name: str):
        """statistics.median of the per-call list `name` (gpu_us, host_us or span_us; None where
        that is None or empty), its list sorted once: the speed-up, band, verdict, notes and row
        each ask, of a million calls a side."""
        xs = getattr(self, name)
        if not xs:
            return None
        got = self._medians.get(name)
        if got is None or got[0] is not xs or got[1] != len(xs):
            got = self._medians[name] = (xs, len(xs), _median(xs))
        return got[2]

    def times(self, by: str) -> list[float] | None:
        """The per-call times `by` measures: "gpu" (GPU time) or "host" (host time)."""
        return self.gpu_us if by == "gpu" else self.host_us

    def times_median(self, by: str):
        """median() of times(by)."""
        return self.median("gpu_us" if by == "gpu" else "host_us")

    def host_bound(self) -> bool:
        """The launcher, not the GPU, sets the pace: the median host time of a call exceeds its
        median span by more than a tenth."""
        return bool(self.host_us and self.span_us and self.median("host_us") > 1.1 * self.median("span_us"))


def _median(xs: list[float]):
    """statistics.median of `xs`; of floats by numpy's partition, not a sort of the list (a
    million calls a side): the middle value, or the mean of the middle two as (a + b) / 2, the
    same float. (Of other numbers, statistics': an odd count of ints gives an int.)"""
    a = np.asarray(xs)
    if a.dtype != np.float64 or a.ndim != 1:
        return statistics.median(xs)
    k = len(a) // 2
    if len(a) % 2:
        return float(np.partition(a, k)[k])
    part = np.partition(a, (k - 1, k))
    return (float(part[k - 1]) + float(part[k])) / 2


@dataclass
class Comparison:
    key: str
    before: Side
    after: Side
    speedup: float
    band: tuple[float, float]
    band_method: str
    verdict: str
    why: str
    caveats: list[str] = field(default_factory=list)
    by: str = "gpu"  # what before_us / after_us and the speed-up measure: "gpu" or "host" time
    notes: list[str] = field(default_factory=list)  # facts beside the verdict (a host-bound side)

    def row(self) -> dict:
        """Flat JSON row (`profkit compare --json`)."""
        b, a = self.before, self.after
        out = {
            "range": self.key,
            "before": f"{b.run}:{b.path}",
            "after": f"{a.run}:{a.path}",
            "by": self.by,
            "before_us": b.times_median(self.by),
            "after_us": a.times_median(self.by),
            "before_gpu_us": b.median_us,
            "after_gpu_us": a.median_us,
            "before_host_us": b.median("host_us"),
            "after_host_us": a.median("host_us"),
            "before_span_us": b.median("span_us"),
            "after_span_us": a.median("span_us"),
            "speedup": self.speedup,
            "speedup_low": self.band[0],
            "speedup_high": self.band[1],
            "band_method": self.band_method,
            "label_before": b.label,
            "label_after": a.label,
            "roofline_pct_before": b.roofline_pct,
            "roofline_pct_after": a.roofline_pct,
            "verdict": self.verdict,
            "why": self.why,
            "caveats": self.caveats,
            "notes": self.notes,
        }
        for name, side in (("before_detail", b), ("after_detail", a)):
            # asdict() deep-copies value by value: seconds for a side of 100 k calls
            d = {f.name: getattr(side, f.name) for f in fields(side) if f.name not in ("run", "path", "_medians")}
            out[name] = {
                k: copy.deepcopy(v) if isinstance(v, dict) else list(v) if isinstance(v, list) else v
                for k, v in d.items()
            }
        return out


BY = ("gpu", "host")


def compare(store: Store, before: str, after: str, by: str = "gpu") -> list[Comparison]:
    """Compare selectors BEFORE and AFTER (``RUN`` or ``RUN:VARIANT``) range by range, by GPU
    time per call or (by="host") host time per call."""
    if by not in BY:
        raise BadArgument(f"compare by {by!r}: one of {', '.join(BY)}")
    sb, sa = selection.parse(before), selection.parse(after)
    runs = [r for r in dict.fromkeys((sb.run, sa.run)) if r in store.runs()]
    labels = {run: label_codes(store, run, later=True) for run in runs}  # (read while the launches are paired)
    try:
        pairs = selection.pair(store, sb, sa, as_columns=True)
        ctx = {run: _RunContext(store, run, labels[run].result()) for run in runs}
    finally:
        for got in labels.values():
            got.stop()  # (read or not: ended before the caller goes on)
    out, timeless = [], []
    band: Pending | None = None  # the last pair's noise band, drawn on a thread while the next pair's sides are read
    held: tuple = ()

    def finish() -> None:
        assert band is not None
        p, b, a = held
        c = _compare_pair(p, b, a, by, band.result())
        if b.hotspot or a.hotspot:
            c.notes.append(f"hotspot {_hot(b.hotspot)} -> {_hot(a.hotspot)} (profkit hotspots)")
        out.append(c)

    try:
        for p in pairs:
            b, a = ctx[sb.run].side(p.before), ctx[sa.run].side(p.after)
            if by == "gpu" and not (b.median_us > 0 and a.median_us > 0):
                # kernels of 0 ns (a trace's rounding, a hostile file): no ratio to take
                timeless.append(f"{p.key} ({', '.join(s.run for s in (b, a) if not s.median_us > 0)})")
                continue
            if by == "host":
                for side in (b, a):
                    if not side.host_us:
                        why = (
                            "one call: a host time runs from one call's first launch to the next's, so it needs "
                            "2 calls or more"
                            if side.calls < 2
                            else "no API start times on its launches (an nsys or CUPTI timeline has them, an "
                            "ncu-only run does not)"
                        )
                        raise BadArgument(f"--by host: {side.run}:{side.path} has no host time per call: {why}")
            if band is not None:
                finish()
            # (numpy's resampling runs without the GIL: one band at a time, beside this thread)
            band, held = Pending(noise_band, b.times(by), a.times(by), name="profkit-band"), (p, b, a)
        if band is not None:
            finish()
            band = None
    finally:
        if band is not None:
            band.stop()  # (an error or an interrupt: the thread ends before the caller goes on)
    if timeless and not out:
        raise BadArgument(
            f"{before} vs {after}: no GPU time to compare (kernels of 0 ns) in "
            f"{', '.join(timeless[:3])}{' ...' if len(timeless) > 3 else ''}"
        )
    for c in out if timeless else ():
        c.notes.append(f"left out, 0 ns of GPU time per call: {', '.join(timeless)}")
    return out


def _hot(h: dict | None) -> str:
    """A side's top line and stall, in a few words."""
    if not h:
        return "(no Source Counters)"
    stall = (h["stall"] or "no stall").replace("_", " ")
    share = f" {100 * h['stall_share']:.0f} %" if h.get("stall_share") else ""
    return f"{h['line'] or 'no line info'}: {stall}{share}"


def rows(store: Store, before: str, after: str, by: str = "gpu") -> list[dict]:
    return [c.row() for c in compare(store, before, after, by)]


def timeline(store: Store, selector: str) -> list[dict]:
    """Every launch of a selection, call by call: where in its call it started, how long it
    ran, the idle gap before it on the GPU, and its label (the rows behind a side's time)."""
    sel = selection.parse(selector)
    groups = selection.groups(store, sel)
    labels = _labels(store, sel.run)
    out = []
    for g in groups.values():
        prev_end = None
        for i, call in enumerate(selection.iterations(g.kernels)):
            t0 = call[0]["start_ns"]
            for k in call:
                start = k["start_ns"]
                out.append(
                    {
                        "range": g.path,
                        "call": i,
                        "kernel": k["short_name"] or k["kernel_name"],
                        "start_us": None if start is None or t0 is None else (start - t0) / 1e3,
                        "duration_us": (k["duration_ns"] or 0) / 1e3,
                        "gap_us": None if start is None or prev_end is None else (start - prev_end) / 1e3,
                        "label": labels.get(k["kernel_id"]),
                        "kernel_id": k["kernel_id"],
                    }
                )
                prev_end = k["end_ns"]
    return out


# --- one side ------------------------------------------------------------------------------


class _RunContext:
    """A run's labels, counters and correctness record, read once."""

    def __init__(self, store: Store, run: str, labels=None):
        self.run = run
        self.labels = label_codes(store, run) if labels is None else labels
        self.hot = hotspots.evidence(store, run)
        self.counters = store.counters(run)
        meta = store.query("SELECT meta FROM runs WHERE run = ?", (run,))
        rec = json.loads(meta[0]["meta"] or "{}").get("correctness") if meta else None
        self.correctness = rec if isinstance(rec, dict) else {}  # (a record of another shape says nothing)

    def side(self, group: selection.Group | selection.Launches) -> Side:
        g = group if isinstance(group, selection.Launches) else _as_columns(group)
        order, lo, hi = call_slices(g.call, g.name)
        if g.start is not None and g.end is not None:
            s, e = g.start[order], g.end[order]
            if (e < s).any():  # (a hostile file's reversed kernel: covered() of its intervals as they are)
                gpu = [covered(zip(s[a:b].tolist(), e[a:b].tolist())) / 1e3 for a, b in zip(lo, hi)]
            else:
                gpu = (slice_covered(s, e, lo, hi) / 1e3).tolist()
            spans = ((slice_max(e, lo, hi) - slice_min(s, lo, hi)) / 1e3).tolist()
        else:
            gpu = (np.add.reduceat(g.duration[order], lo) / 1e3).tolist() if len(lo) else []
            spans = None
        host = None
        if len(lo) > 1 and g.api_start is not None:
            host = (np.diff(slice_min(g.api_start[order], lo, hi)) / 1e3).tolist()
        # GPU us per label, the labels in the order of their first launch
        code = self.labels.codes(g.kernel_id)
        ns = np.bincount(code, weights=g.duration.astype(np.float64), minlength=len(self.labels.labels))
        seen = np.flatnonzero(np.bincount(code, minlength=len(self.labels.labels)))  # (a few labels)
        first = [int(np.argmax(code == c)) for c in seen.tolist()]
        labels = {self.labels.labels[c]: float(ns[c]) / 1e3 for c in seen[np.argsort(first)].tolist()}
        total = sum(labels.values())
        label = max(labels, key=labels.__getitem__) if labels else None
        s = Side(
            self.run,
            g.path,
            len(lo),
            int(hi[0] - lo[0]) if len(lo) else 0,
            gpu,
            spans,
            label,
            labels[label] / total if label and total else None,
            labels,
            correctness=self.correctness.get(g.path),
            host_us=host,
        )
        ids = g.kernel_id.tolist() if self.counters or self.hot else []
        if self.counters:  # (without counters a side has none: Side.counters stays False)
            _counter_facts(s, [self.counters.get(k, {}) for k in ids])
        hot = [self.hot[k] for k in ids if k in self.hot]
        if hot:
            s.hotspot = max(hot, key=lambda h: h["samples"])
        return s


def _as_columns(group: selection.Group) -> selection.Launches:
    """A Group's rows as the columns side() reads."""
    ks = group.kernels
    names: dict = {}

    def col(field: str):
        vals = [k[field] for k in ks]
        return None if None in vals else np.array(vals, dtype=np.int64)

    return selection.Launches(
        group.key,
        group.path,
        np.array([k["kernel_id"] for k in ks], dtype=np.int64),
        np.array([names.setdefault(k["kernel_name"], len(names)) for k in ks], dtype=np.int64),
        col("start_ns") if col("end_ns") is not None else None,
        col("end_ns") if col("start_ns") is not None else None,
        np.array([k["duration_ns"] or 0 for k in ks], dtype=np.int64),
        col("api_start_ns"),
        np.array([selection.NO_CALL if k.get("call") is None else k["call"] for k in ks], dtype=np.int64),
    )


def call_slices(call: np.ndarray, name: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """selection.iterations as columns: an order of the launches that puts each call's launches
    together (in launch order), and each call's slice [lo, hi) of that order."""
    n = len(call)
    if not n:
        return np.zeros(0, dtype=np.intp), np.zeros(0, dtype=np.intp), np.zeros(0, dtype=np.intp)
    if (call != selection.NO_CALL).all():
        ids, first, inverse = np.unique(call, return_index=True, return_inverse=True)
        if len(ids) > 1:
            rank = np.empty(len(ids), dtype=np.intp)
            rank[np.argsort(first)] = np.arange(len(ids))  # calls in the order of their first launch
            number = rank[inverse.reshape(-1)]
            order = np.argsort(number, kind="stable")
            size = np.bincount(number, minlength=len(ids))
            hi = np.cumsum(size)
            return order, hi - size, hi
    every = np.arange(n)
    for period in range(1, n // 2 + 1):
        if n % period == 0 and np.array_equal(name[period : 2 * period], name[:period]):
            if (name.reshape(-1, period) == name[:period]).all():
                lo = np.arange(0, n, period)
                return every, lo, lo + period
    return every, np.zeros(1, dtype=np.intp), np.full(1, n, dtype=np.intp)


def _counter_facts(side: Side, per_kernel: list[dict[str, float]]) -> None:
    """% of roofline, binding roof, DRAM % and bytes of a side from its kernels' counters."""
    durations = {i: d for i, c in enumerate(per_kernel) if (d := lookup(c, "duration"))}
    have = [per_kernel[i] for i in durations]
    side.counters = bool(per_kernel) and len(have) == len(per_kernel)
    if not have:
        return
    t_total = sum(durations.values())
    roofs: dict[str, float] = {}
    t_roof = 0.0
    for c in have:
        r = roof_time_ns(c)
        if r is None:
            return  # a kernel without peaks: no honest % for the side
        t_roof += r[0]
        roofs[r[1]] = roofs.get(r[1], 0.0) + r[0]
    side.roofline_pct = 100.0 * t_roof / t_total if t_total else None
    side.roof = max(roofs, key=roofs.__getitem__) if roofs else None
    dram = [(p, durations[i]) for i in durations if (p := lookup(per_kernel[i], "dram_pct")) is not None]
    if dram:
        side.dram_pct = sum(p * t for p, t in dram) / sum(t for _, t in dram)
    byts = [b for c in have if (b := lookup(c, "dram_bytes")) is not None]
    if len(byts) == len(have) and side.calls:
        side.dram_bytes_per_call = sum(byts) / side.calls


# --- the pair ------------------------------------------------------------------------------


def noise_band(before: list[float], after: list[float]) -> tuple[tuple[float, float], str]:
    """Band of the speed-up median(before)/median(after) from the spread of the calls."""
    n = min(len(before), len(after))
    if n < BOOTSTRAP_MIN_CALLS:
        return (
            (_ratio(min(before), max(after)), _ratio(max(before), min(after))),
            f"min..max over all pairings of {len(before)} x {len(after)} calls "
            f"(under {BOOTSTRAP_MIN_CALLS} calls a side: range, not a confidence interval)",
        )
    many = len(before) + len(after) > BOOTSTRAP_DRAWN
    ratios = _bootstrap_ratios_many(before, after) if many else _bootstrap_ratios(before, after)
    lo, hi = (ratios[min(len(ratios) - 1, int(p / 100 * len(ratios)))] for p in BAND_PERCENTILES)
    return (lo, hi), (
        f"bootstrap {BAND_PERCENTILES[0]}-{BAND_PERCENTILES[1]} percentile of the ratio of "
        f"medians, {BOOTSTRAP_SAMPLES} resamples of {len(before)} x {len(after)} calls"
        + (" (each resample's middle order statistics drawn directly)" if many else "")
    )


def _ratio(a: float, b: float) -> float:
    """a / b, a call of 0 ns on the after side making it unbounded."""
    return a / b if b else (float("inf") if a else 1.0)


def _bootstrap_ratios(before: list[float], after: list[float]) -> list[float]:
    """The BOOTSTRAP_SAMPLES ratios of medians of resamples, sorted: the draws of
    random.Random(0).choices(before), then .choices(after), per resample, done in numpy.
    numpy's legacy generator is the same Mersenne Twister as `random`, started from
    random.Random(0)'s state: the same doubles, the same picks floor(u * n), the same medians
    (the mean of the middle two for an even count), bit for bit (tests/test_compare.py holds
    it to the pure-Python loop)."""
    import numpy as np

    nb, na = len(before), len(after)
    state = random.Random(0).getstate()[1]
    gen = np.random.RandomState()
    # has_gauss 0 and cached_gaussian 0.0: the defaults numpy takes for a 3-tuple state
    gen.set_state(("MT19937", np.array(state[:624], dtype=np.uint32), state[624], 0, 0.0))
    before_, after_ = np.asarray(before, dtype=float), np.asarray(after, dtype=float)
    out: list[float] = []
    # a block of resamples at a time (the same stream of draws): a range of 100 k calls a side
    # would otherwise hold 2000 x 200 k draws at once
    block = max(1, min(BOOTSTRAP_SAMPLES, BOOTSTRAP_DRAWS // (nb + na)))
    for first in range(0, BOOTSTRAP_SAMPLES, block):
        n = min(block, BOOTSTRAP_SAMPLES - first)
        u = gen.random_sample(n * (nb + na)).reshape(n, nb + na)
        b = before_[np.floor(u[:, :nb] * float(nb)).astype(np.intp)]
        a = after_[np.floor(u[:, nb:] * float(na)).astype(np.intp)]
        out += (np.median(b, axis=1) / np.median(a, axis=1)).tolist()
    return sorted(out)


def _bootstrap_ratios_many(before: list[float], after: list[float]) -> list[float]:
    """The BOOTSTRAP_SAMPLES ratios of medians of resamples, sorted, for sides of many calls:
    the same bootstrap as _bootstrap_ratios (resamples of each side's calls with replacement),
    its medians drawn without drawing every call of every resample (_resampled_medians)."""
    gen = np.random.default_rng(0)
    b = _resampled_medians(np.sort(np.asarray(before, dtype=float)), gen)
    a = _resampled_medians(np.sort(np.asarray(after, dtype=float)), gen)
    with np.errstate(divide="ignore", invalid="ignore"):
        return sorted((b / a).tolist())


def _resampled_medians(x: np.ndarray, gen: np.random.Generator) -> np.ndarray:
    """The medians of BOOTSTRAP_SAMPLES resamples (n draws with replacement) of sorted `x`, in
    O(sqrt(n)) draws each rather than n: a resample's median is its middle order statistics,
    and only draws of the values near x's middle decide which ones they are. Per resample:
    how many draws fall below a window of about 10 sqrt(n) values around the middle and how
    many above it (binomial counts: exact), then the draws inside the window one by one. A
    resample's middle outside the window (over 10 standard deviations of its rank away: never
    seen) has its draws outside the window drawn too."""
    n = len(x)
    k_lo, k_hi = (n - 1) // 2, n // 2  # the middle order statistics (one for odd n)
    half = int(5 * n**0.5) + 2
    lo, hi = max(0, n // 2 - half), min(n, n // 2 + half + 1)
    width = hi - lo
    below = gen.binomial(n, lo / n, BOOTSTRAP_SAMPLES)
    above = gen.binomial(n - below, (n - hi) / (n - lo))
    inside = n - below - above
    # a block of resamples at a time (about block x width draws held)
    block = max(1, BOOTSTRAP_DRAWS // width)
    r_lo, r_hi = np.zeros(BOOTSTRAP_SAMPLES, dtype=np.intp), np.zeros(BOOTSTRAP_SAMPLES, dtype=np.intp)
    for first in range(0, BOOTSTRAP_SAMPLES, block):
        m = slice(first, min(first + block, BOOTSTRAP_SAMPLES))
        at = gen.integers(0, width, int(inside[m].sum()))  # each resample's draws in turn
        ends = np.cumsum(inside[m]).tolist()
        # each resample's middle draws: its (k - below)-th smallest in the window, by a
        # partition of its own draws (the second middle: the least of those after the first)
        for i, a, b, end in zip(range(first, m.stop), (k_lo - below[m]).tolist(), (k_hi - below[m]).tolist(), ends):
            start = end - int(inside[i])
            if 0 <= a and b < end - start:  # (else its middle lies outside the window: below)
                part = np.partition(at[start:end], a)
                r_lo[i] = part[a]
                r_hi[i] = part[a] if b == a else part[a + 1 :].min()
    out = (x[lo + r_lo] + x[lo + r_hi]) / 2
    missed = np.flatnonzero((below > k_lo) | (below + inside <= k_hi))
    for i in missed.tolist():  # the resample drawn whole, its counts below and above as drawn
        parts = [(0, lo, below[i]), (lo, hi, inside[i]), (hi, n, above[i])]
        picks = np.concatenate([gen.integers(a, b, k) for a, b, k in parts if k])
        mid = np.sort(x[picks])
        out[i] = (mid[k_lo] + mid[k_hi]) / 2
    return out


def verdict(
    speedup: float, band: tuple[float, float], before: Side, after: Side, by: str = "gpu"
) -> tuple[str, str, list[str]]:
    """(verdict, one-line why, caveats); `by`: the measure the speed-up and band are of."""
    ok = (after.correctness or {}).get("ok")
    if ok is False:
        return "rejected", f"{after.path} failed its reference check ({_check_text(after.correctness)})", []
    if speedup <= 1:
        return "rejected", f"not faster: {speedup:.2f}x (band {band[0]:.2f}-{band[1]:.2f})", []
    caveats = []
    nb, na = len(before.times(by) or ()), len(after.times(by) or ())
    what = "calls" if by == "gpu" else "host times"
    if min(nb, na) < 2:
        caveats.append(f"one {what[:-1]} on a side ({nb} before, {na} after): no noise estimate")
    elif band[0] <= 1:
        caveats.append(f"noise band {band[0]:.2f}-{band[1]:.2f} reaches 1 ({nb} {what} before, {na} after)")
    if ok is None:
        caveats.append(f"no correctness record for {after.path}")
    # counters describe the kernels (label, % of roofline), not the launcher a host comparison judges
    missing = [s.path for s in (before, after) if not s.counters] if by == "gpu" else []
    if missing:
        caveats.append("no counters for " + ", ".join(missing) + " (label and % of roofline from the timeline only)")
    faster = f"{speedup:.2f}x faster" + (" on the host" if by == "host" else "")
    if caveats:
        return "caveated", f"{faster}, but " + "; ".join(caveats), caveats
    return (
        "supported",
        (
            f"{faster} beyond noise (band {band[0]:.2f}-{band[1]:.2f}), "
            f"reference check passed ({_check_text(after.correctness)})"
        ),
        [],
    )


def _check_text(rec: dict | None) -> str:
    if not rec:
        return "no record"
    parts = [
        f"{k} {rec[k]:.2e}" if isinstance(rec[k], float) else f"{k} {rec[k]}" for k in ("rel_err", "tol") if k in rec
    ]
    return ", ".join(parts) or ("passed" if rec.get("ok") else "failed")


def _compare_pair(p: selection.Pair, before: Side, after: Side, by: str = "gpu", banded=None) -> Comparison:
    """`banded`: noise_band's answer for the pair, drawn already."""
    tb, ta = before.times(by), after.times(by)
    assert tb is not None and ta is not None  # compare() refuses --by host for a side without host times
    mb, ma = before.times_median(by), after.times_median(by)
    speedup = mb / ma if ma else float("inf")
    band, method = banded or noise_band(tb, ta)
    if by == "host":
        method = "host time per call: " + method
    v, why, caveats = verdict(speedup, band, before, after, by)
    notes = []
    if by == "gpu":
        bound = [f"{s.run}:{s.path}" for s in (before, after) if s.host_bound()]
        if bound:
            notes.append(
                f"host-bound (the host takes longer a call than the GPU's span: the GPU waits on the "
                f"launcher): {', '.join(bound)}; --by host compares what the caller waits for"
            )
    else:
        notes.append(f"GPU time per call {before.median_us:,.1f} -> {after.median_us:,.1f} us")
        if not (before.host_bound() or after.host_bound()):
            notes.append(
                "neither side is host-bound: the GPU sets the pace of these calls, and the "
                "GPU time (the default) is what the caller waits for"
            )
    return Comparison(p.key, before, after, speedup, band, method, v, why, caveats, by, notes)
