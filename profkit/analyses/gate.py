"""A regression gate: a run against a named baseline, range by range, with a decision a CI job
can act on (docs/gate.md has the method for readers).

- Samples: per NVTX range, the GPU time of each call (profkit.analyses.compare's sides: the
  union of the call's kernel intervals) or, `by="host"`, its host time; per kernel inside the
  range, the kernel's own time in each call.
- The band: compare.noise_band of the speed-up baseline/run (a bootstrap of the ratio of
  medians from 10 calls a side, the min..max over all pairings below). The gate reads it as a
  slow-down factor s = run/baseline with its band [s_lo, s_hi].
- Decision against a threshold t (`--max-regression`, 3 % by default), with L = 1 + t:
  `regression`: s > L and s_lo > 1 (slower beyond noise, by more than the threshold);
  `improvement`: s < 1/L and s_hi < 1; `pass`: s_hi <= L (the samples rule out a slow-down
  beyond the threshold); otherwise `undecided`. Ranges of one call a side are undecided.
- Resolution: sigma = 1.4826 x MAD of log(time per call) on each side; the standard error of
  the log ratio of medians is sqrt(pi/2) x sqrt(sigma_b^2/n_b + sigma_r^2/n_r); the smallest
  change the samples can tell at 95 % (two-sided, with 80 % power) is
  exp((1.96 + 0.84) x SE) - 1.
  From 10 calls a side the SE is at least the bootstrap band's half-width / 1.96.
- More calls: for an undecided range, the calls a side at which the distance from the observed
  log slow-down to the boundary it has to clear (1 where it points at a regression, L where it
  points at a pass) is (1.96 + 0.84) standard errors (SE shrinking as 1/sqrt(calls)), less the
  calls it has; at least up to 10 a side, where the band becomes a bootstrap interval.
"""

from __future__ import annotations

import fnmatch
import math
import random
import statistics
from dataclasses import asdict, dataclass, field

from profkit.analyses import selection
from profkit.analyses.classify import labels as _labels
from profkit.analyses.compare import BOOTSTRAP_MIN_CALLS, _RunContext, noise_band
from profkit.core.errors import BadArgument
from profkit.store.baselines import Baseline, KernelSamples, RangeSamples, now
from profkit.store.store import Store, command_of

Z_95 = 1.959964  # two-sided 95 %
Z_POWER = 0.841621  # 80 % power
MEDIAN_SE = math.sqrt(math.pi / 2)  # SE of a median over SE of a mean, normal samples
DEFAULT_THRESHOLD = 0.03
MAX_CALLS = 100_000  # "more than this": the change sits at the threshold
KERNEL_ROWS_FOR = 3  # ranges (the worst) whose kernels are gated one by one
FACTS = ("gpu", "driver", "clocks", "tools", "shape", "variants")
TOOLS = ("nsys_version", "ncu_version", "timeline_tracer")  # what measured: a difference refuses
# what ran: a change a pull request may be about (a Triton upgrade), so a difference is a note
LIBRARIES = ("torch_version", "triton_version", "cuda")
VERDICTS = ("pass", "improvement", "undecided", "regression")
EXIT = {"pass": 0, "improvement": 0, "regression": 1, "undecided": 3}


# --- what a run holds ---------------------------------------------------------------------


def samples(store: Store, run: str) -> list[RangeSamples]:
    """Per NVTX range of RUN (in launch order): the GPU and host time of each call, its dominant
    label, and each kernel's time per call with its label (labels only where counters exist)."""
    ctx = _RunContext(store, run)
    groups = selection.groups(store, selection.parse(run))
    counted = set(ctx.counters)
    labels = _labels(store, run) if counted else {}
    out = []
    for g in groups.values():
        side = ctx.side(g)
        calls = selection.iterations(g.kernels)
        per: dict[str, list[float]] = {}
        lab: dict[str, str | None] = {}
        for i, call in enumerate(calls):
            for k in call:
                name = k["kernel_name"]
                per.setdefault(name, [0.0] * len(calls))[i] += (k["duration_ns"] or 0) / 1e3
                if k["kernel_id"] in counted and name not in lab:
                    lab[name] = labels.get(k["kernel_id"])
        kernels = [KernelSamples(n, xs, lab.get(n)) for n, xs in per.items()]
        out.append(RangeSamples(g.path, side.gpu_us, side.host_us, side.label if counted else None, kernels))
    return out


def facts(store: Store, run: str) -> dict:
    """The facts two runs must share to be compared: GPU, driver, clock setting, tool versions,
    workload shape and variant set (None: not recorded)."""
    meta = store.run_meta(run)
    gpu = meta.get("gpu_name") or (store.query("SELECT gpu_name FROM run WHERE run = ?", (run,)) or [{}])[0].get(
        "gpu_name"
    )
    cmd = command_of(meta) or []
    shapes = sorted({cmd[i + 1] for i, a in enumerate(cmd[:-1]) if a == "--shape"})
    variants = sorted({cmd[i + 1] for i, a in enumerate(cmd[:-1]) if a == "--variant"})
    if not variants:
        paths = [g.path for g in selection.groups(store, selection.parse(run)).values()]
        variants = sorted(selection.variants(paths))
    tools = {k: meta[k] for k in TOOLS if meta.get(k)}
    libraries = {k: meta[k] for k in LIBRARIES if meta.get(k)}
    return {
        "gpu": gpu,
        "driver": meta.get("driver"),
        "clocks": meta.get("clock_control") or meta.get("clocks"),
        "tools": tools or None,
        "shape": shapes or None,
        "variants": variants or None,
        "libraries": libraries or None,
    }


def snapshot(store: Store, run: str, name: str) -> Baseline:
    """The baseline NAME would hold of RUN."""
    return Baseline(name, run, now(), facts(store, run), samples(store, run))


# --- comparability --------------------------------------------------------------------------


@dataclass
class Difference:
    fact: str  # one of FACTS
    baseline: object
    run: object

    def line(self) -> str:
        return f"{self.fact}: {_fact_text(self.baseline)} (baseline) -> {_fact_text(self.run)} (run)"


def differences(base: dict, run: dict) -> tuple[list[Difference], list[str]]:
    """(differences, notes): a fact recorded on both sides that differs is a difference (one per
    tool for `tools`); a fact recorded on one side only is a note, not a refusal, and so is a
    library version that differs."""
    diffs, notes = [], []
    lb, lr = base.get("libraries") or {}, run.get("libraries") or {}
    for lib in sorted(set(lb) & set(lr)):
        if lb[lib] != lr[lib]:
            notes.append(
                f"{lib}: {lb[lib]} (baseline) -> {lr[lib]} (run): compared (a library the change may be about)"
            )
    for f in FACTS:
        b, r = base.get(f), run.get(f)
        if f == "tools" and b and r:
            for tool in sorted(set(b) & set(r)):
                if b[tool] != r[tool]:
                    diffs.append(Difference("tools", {tool: b[tool]}, {tool: r[tool]}))
            continue
        if b is None and r is None:
            continue
        if b is None or r is None:
            notes.append(
                f"{f}: not recorded for the {'baseline' if b is None else 'run'} "
                f"({_fact_text(r if b is None else b)} on the other side)"
            )
        elif b != r:
            diffs.append(Difference(f, b, r))
    return diffs, notes


def parse_allow(text: str | None) -> set[str]:
    got = {a.strip() for a in (text or "").split(",") if a.strip()}
    bad = sorted(got - set(FACTS))
    if bad:
        raise BadArgument(f"--allow {','.join(bad)}: the facts are {', '.join(FACTS)}")
    return got


def _fact_text(v) -> str:
    if isinstance(v, dict):
        return ", ".join(f"{k} {x}" for k, x in v.items())
    if isinstance(v, list):
        return ",".join(map(str, v))
    return str(v)


# --- one decision ---------------------------------------------------------------------------


@dataclass
class Decision:
    verdict: str
    slowdown: float  # median(run) / median(baseline): > 1 slower
    band: tuple[float, float]  # of the slow-down
    band_method: str
    detectable_pct: float | None  # smallest change the samples can tell at 95 % (80 % power)
    more_calls: int | None  # undecided: about this many more calls a side would settle it
    why: str
    n_baseline: int
    n_run: int

    @property
    def change_pct(self) -> float:
        return 100.0 * (self.slowdown - 1.0)


def spread(xs: list[float]) -> float:
    """Robust standard deviation of log(x): 1.4826 x the median absolute deviation."""
    logs = [math.log(x) for x in xs if x > 0]
    if len(logs) < 2:
        return 0.0
    m = statistics.median(logs)
    return 1.4826 * statistics.median(abs(v - m) for v in logs)


def log_se(before: list[float], after: list[float], nb: int | None = None, na: int | None = None) -> float:
    """Standard error of log(median(after)/median(before)) at nb, na calls (default: as given)."""
    nb, na = nb or len(before), na or len(after)
    return MEDIAN_SE * math.sqrt(spread(before) ** 2 / nb + spread(after) ** 2 / na)


def decide(before: list[float], after: list[float], threshold: float = DEFAULT_THRESHOLD) -> Decision:
    """The verdict on BEFORE (baseline) -> AFTER (run) per-call times against `threshold`."""
    if threshold <= 0 or threshold >= 1:
        raise BadArgument(f"--max-regression {threshold:.1%}: between 0 and 100 %")
    nb, na = len(before), len(after)
    limit = 1.0 + threshold
    mb, ma = statistics.median(before), statistics.median(after)
    if mb <= 0 or ma <= 0:
        return Decision(
            "undecided",
            float("nan"),
            (float("nan"), float("nan")),
            "",
            None,
            None,
            "a median time of 0 (no kernel time in the range)",
            nb,
            na,
        )
    slow = ma / mb
    if min(nb, na) < 2:
        return Decision(
            "undecided",
            slow,
            (slow, slow),
            "one call on a side: no noise estimate",
            None,
            max(1, BOOTSTRAP_MIN_CALLS - min(nb, na)),
            f"one call on a side ({nb} baseline, {na} run): no noise estimate",
            nb,
            na,
        )
    (lo, hi), method = noise_band(before, after)  # of the speed-up before/after
    s_lo, s_hi = 1.0 / hi, 1.0 / lo
    se = log_se(before, after)
    if min(nb, na) >= BOOTSTRAP_MIN_CALLS:
        # the bootstrap band of a median is lumpy at a dozen calls: where it is wider than the
        # spread says, the band is what the decision meets
        se = max(se, (math.log(s_hi) - math.log(s_lo)) / (2 * Z_95))
    detectable = 100.0 * (math.exp((Z_95 + Z_POWER) * se) - 1.0)
    pct = f"{100 * (slow - 1):+.1f} %"
    if slow > limit and s_lo > 1:
        v, why = "regression", f"{pct}, slower beyond noise and beyond {threshold:.0%}"
    elif slow < 1 / limit and s_hi < 1:
        v, why = "improvement", f"{pct}, faster beyond noise and beyond {threshold:.0%}"
    elif s_hi <= limit:
        v, why = "pass", f"{pct}; a slow-down beyond {threshold:.0%} is ruled out"
    else:
        v = "undecided"
        why = (
            f"{pct}: the band reaches both 1 and {threshold:.0%}"
            if slow > limit
            else f"{pct}: the band reaches a {threshold:.0%} slow-down"
        )
    more = calls_needed(min(nb, na), se, slow, limit) if v == "undecided" else None
    return Decision(v, slow, (s_lo, s_hi), method, detectable, more, why, nb, na)


def calls_needed(n: int, se: float, slow: float, limit: float) -> int:
    """More calls a side that would put the band clear of the boundary the observed slow-down
    points at (1 above the threshold, the threshold below it) with 80 % power at 95 %, the
    standard error SE (at N calls a side) shrinking as 1/sqrt(calls)."""
    target = math.log(slow) if slow > limit else math.log(limit) - math.log(slow)
    if target <= 0:
        return MAX_CALLS
    need = math.ceil(n * ((Z_95 + Z_POWER) * se / target) ** 2) if se > 0 else n
    need = max(need, BOOTSTRAP_MIN_CALLS)  # below 10 calls a side the band is a range (compare.noise_band)
    return min(MAX_CALLS, max(1, need - n))


# --- the gate -------------------------------------------------------------------------------


@dataclass
class KernelRow:
    kernel: str
    decision: Decision | None  # None: on one side only
    baseline_us: float | None
    run_us: float | None
    label_baseline: str | None
    label_run: str | None
    note: str = ""

    @property
    def label_changed(self) -> bool:
        return bool(self.label_baseline and self.label_run and self.label_baseline != self.label_run)


@dataclass
class RangeRow:
    path: str
    decision: Decision
    baseline_us: float
    run_us: float
    label_baseline: str | None
    label_run: str | None
    kernels: list[KernelRow] = field(default_factory=list)


@dataclass
class GateResult:
    baseline: str
    baseline_run: str
    runs: list[str]  # the run gated, then any re-captures pooled with it
    by: str
    threshold: float
    ranges: list[RangeRow]
    differences: list[Difference]
    allowed: list[str]
    notes: list[str]
    rerun: list[str] = field(default_factory=list)  # what --rerun did, one line a step

    @property
    def verdict(self) -> str:
        vs = {r.decision.verdict for r in self.ranges}
        for v in ("regression", "undecided", "improvement"):
            if v in vs:
                return v
        return "pass"

    @property
    def exit_code(self) -> int:
        return EXIT[self.verdict]

    def undecided(self) -> list[RangeRow]:
        return [r for r in self.ranges if r.decision.verdict == "undecided"]

    def summary(self) -> str:
        counts = {v: sum(r.decision.verdict == v for r in self.ranges) for v in VERDICTS}
        parts = ", ".join(f"{n} {v}" for v, n in counts.items() if n)
        line = f"{self.verdict}: {parts} (threshold {self.threshold:.1%}, by {self.by})"
        und = self.undecided()
        if und:
            more = max(r.decision.more_calls or 0 for r in und)
            line += (
                f"; undecided: about {more:,} more calls a side would settle it"
                if more < MAX_CALLS
                else "; undecided: the change sits at the threshold (no practical number of calls settles it)"
            )
        return line

    def to_dict(self) -> dict:
        def dec(d: Decision | None):
            if d is None:
                return None
            out = asdict(d)
            out["band"] = list(d.band)
            out["change_pct"] = d.change_pct
            return out

        return {
            "verdict": self.verdict,
            "exit_code": self.exit_code,
            "summary": self.summary(),
            "baseline": self.baseline,
            "baseline_run": self.baseline_run,
            "runs": self.runs,
            "by": self.by,
            "threshold": self.threshold,
            "differences": [d.line() for d in self.differences],
            "allowed": self.allowed,
            "notes": self.notes,
            "rerun": self.rerun,
            "ranges": [
                {
                    "range": r.path,
                    **dec(r.decision),
                    "baseline_us": r.baseline_us,
                    "run_us": r.run_us,
                    "label_baseline": r.label_baseline,
                    "label_run": r.label_run,
                    "kernels": [
                        {
                            "kernel": k.kernel,
                            "decision": dec(k.decision),
                            "baseline_us": k.baseline_us,
                            "run_us": k.run_us,
                            "label_baseline": k.label_baseline,
                            "label_run": k.label_run,
                            "label_changed": k.label_changed,
                            "note": k.note,
                        }
                        for k in r.kernels
                    ],
                }
                for r in self.ranges
            ],
        }


def matches(path: str, pattern: str | None) -> bool:
    """--range PATTERN: a glob over the NVTX path where it has one of * ? [, else the path itself,
    a path under it, or one '/'-separated part of it."""
    if not pattern:
        return True
    if any(c in pattern for c in "*?["):
        return fnmatch.fnmatchcase(path, pattern)
    return path == pattern or path.startswith(pattern + "/") or pattern in path.split("/")


def pooled(parts: list[list[RangeSamples]]) -> list[RangeSamples]:
    """Several runs' samples of the same ranges as one: each range's (and kernel's) calls
    concatenated, in the first run's order; host times concatenated too (each run's own)."""
    first = parts[0]
    out = []
    for r in first:
        same = [x for p in parts for x in p if x.path == r.path]
        host = None if any(x.host_us is None for x in same) else [v for x in same for v in x.host_us or ()]
        kernels = []
        for k in r.kernels:
            ks = [next((y for y in x.kernels if y.name == k.name), None) for x in same]
            kernels.append(KernelSamples(k.name, [v for y in ks if y is not None for v in y.gpu_us], k.label))
        out.append(RangeSamples(r.path, [v for x in same for v in x.gpu_us], host, r.label, kernels))
    return out


def gate(
    base: Baseline,
    run_samples: list[RangeSamples],
    run_facts: dict,
    runs: list[str],
    *,
    threshold: float = DEFAULT_THRESHOLD,
    by: str = "gpu",
    pattern: str | None = None,
    allow: set[str] | frozenset = frozenset(),
) -> GateResult:
    """Gate RUN_SAMPLES (one run's, or several pooled) against BASE."""
    if by not in ("gpu", "host"):
        raise BadArgument(f"--by {by!r}: one of gpu, host")
    diffs, notes = differences(base.facts, run_facts)
    refused = [d for d in diffs if d.fact not in allow]
    if refused:
        raise BadArgument(
            f"baseline {base.name!r} (run {base.run}) is not comparable with {runs[0]}: "
            + "; ".join(d.line() for d in refused)
            + f" (--allow {','.join(sorted({d.fact for d in refused}))} compares anyway)"
        )
    mine = {r.path: r for r in run_samples}
    chosen = [r for r in base.ranges if matches(r.path, pattern)]
    if not chosen:
        more = " ..." if len(base.ranges) > 4 else ""
        raise BadArgument(
            f"--range {pattern!r} matches no range of baseline {base.name!r} "
            f"(ranges: {', '.join(r.path for r in base.ranges[:4])}{more})"
        )
    missing = [r.path for r in chosen if r.path not in mine]
    if missing:
        raise BadArgument(
            f"{runs[0]} has no range {missing[0]!r} of baseline {base.name!r}"
            f"{f' (and {len(missing) - 1} more)' if len(missing) > 1 else ''}: the benchmark "
            f"changed; --range PATTERN gates the ranges both have"
        )
    extra = [p for p in mine if p not in {r.path for r in base.ranges} and matches(p, pattern)]
    if extra:
        notes.append(f"not in the baseline, not gated: {', '.join(extra[:5])}{' ...' if len(extra) > 5 else ''}")
    if by == "host":
        # the band treats calls as independent; separate A/A captures on an H100 moved the host
        # time per call by tens of percent between processes (benchmarks/results/gate.md)
        notes.append(
            "by host: the band covers call-to-call noise only; host time per call also moves between "
            "processes, so a host verdict from one capture a side can be a false alarm (docs/gate.md)"
        )
    rows = []
    for b in chosen:
        r = mine[b.path]
        tb, tr = b.times(by), r.times(by)
        if not tb or not tr:
            raise BadArgument(
                f"--by host: {b.path} has no host time per call on the "
                f"{'baseline' if not tb else 'run'} side (it needs 2 calls or more on a timeline "
                f"with API start times)"
            )
        d = decide(tb, tr, threshold)
        rows.append(RangeRow(b.path, d, statistics.median(tb), statistics.median(tr), b.label, r.label))
    worst = sorted(
        (x for x in rows if x.decision.verdict in ("regression", "undecided")), key=lambda x: -x.decision.slowdown
    )[:KERNEL_ROWS_FOR]
    for row in worst:
        b = next(x for x in chosen if x.path == row.path)
        row.kernels = kernel_rows(b, mine[row.path], threshold)
    return GateResult(
        base.name, base.run, runs, by, threshold, rows, diffs, sorted(allow & {d.fact for d in diffs}), notes
    )


def kernel_rows(b: RangeSamples, r: RangeSamples, threshold: float) -> list[KernelRow]:
    """Each kernel of a range: its own verdict, the most slowed first; kernels on one side only
    say so."""
    mine = {k.name: k for k in r.kernels}
    out = []
    for k in b.kernels:
        o = mine.get(k.name)
        if o is None:
            out.append(
                KernelRow(k.name, None, statistics.median(k.gpu_us), None, k.label, None, "not launched in the run")
            )
            continue
        d = (
            decide(k.gpu_us, o.gpu_us, threshold)
            if min(statistics.median(k.gpu_us), statistics.median(o.gpu_us)) > 0
            else None
        )
        out.append(KernelRow(k.name, d, statistics.median(k.gpu_us), statistics.median(o.gpu_us), k.label, o.label))
    known = {k.name for k in b.kernels}
    for o in r.kernels:
        if o.name not in known:
            out.append(
                KernelRow(
                    o.name,
                    None,
                    None,
                    statistics.median(o.gpu_us),
                    None,
                    o.label,
                    "new in the run (not in the baseline)",
                )
            )
    # most added time first: the kernel that moved
    out.sort(key=lambda k: -((k.run_us or 0) - (k.baseline_us or 0)))
    return out


def gate_runs(store: Store, base: Baseline, runs: list[str], **kw) -> GateResult:
    """Gate RUNS (the first, and re-captures of the same benchmark pooled with it) against BASE."""
    parts = [samples(store, r) for r in runs]
    return gate(base, pooled(parts), facts(store, runs[0]), list(runs), **kw)


def rerun_loop(
    store_factory,
    base: Baseline,
    run: str,
    recapture,
    *,
    budget_runs: int = 5,
    budget_s: float | None = None,
    clock=None,
    **kw,
) -> GateResult:
    """Gate RUN; while a range is undecided and the budget lasts, re-capture the benchmark
    (`recapture(i) -> run name`, a timeline-only capture loaded into the database) and gate the
    runs pooled. Says what it did in `result.rerun`."""
    import time as _time

    clock = clock or _time.monotonic
    t0 = clock()
    runs = [run]
    done: list[str] = []
    while True:
        with store_factory() as s:
            result = gate_runs(s, base, runs, **kw)
        undecided = result.undecided()
        if not undecided:
            done.append(
                f"decided after {len(runs) - 1} re-capture{'s' if len(runs) != 2 else ''}"
                if len(runs) > 1
                else "decided on the first run: nothing re-captured"
            )
            break
        if len(runs) - 1 >= budget_runs:
            done.append(
                f"budget spent: {budget_runs} re-capture{'s' if budget_runs != 1 else ''} "
                f"(--budget-runs); {len(undecided)} range{'s' if len(undecided) != 1 else ''} undecided"
            )
            break
        if budget_s is not None and clock() - t0 >= budget_s:
            done.append(
                f"budget spent: {clock() - t0:.0f} s of {budget_s:.0f} s (--budget-s); "
                f"{len(undecided)} range{'s' if len(undecided) != 1 else ''} undecided"
            )
            break
        more = max(r.decision.more_calls or 0 for r in undecided)
        t1 = clock()
        new = recapture(len(runs))
        runs.append(new)
        done.append(
            f"re-captured as run {new} in {clock() - t1:.0f} s ({len(undecided)} undecided; "
            f"about {more:,} more calls a side wanted)"
        )
    result.rerun = done
    return result


# --- the simulation (docs/gate.md) ----------------------------------------------------------


def simulate(
    ranges: dict[str, list[float]],
    *,
    trials: int = 200,
    slowdowns=(0.02, 0.05, 0.10),
    threshold: float = DEFAULT_THRESHOLD,
    seed: int = 0,
    draw: str = "split",
) -> dict:
    """A/A and planted slow-downs over recorded per-call times. For each range and trial, two
    samples are drawn from the range's calls: `split` shuffles them and takes the two halves,
    `resample` draws two samples of the range's size with replacement (the bootstrap regime
    the gate meets from 10 calls a side). A/A gates one against the other (a `regression` is a
    false alarm); a planted slow-down multiplies the second by 1 + x (a `regression` is a
    catch). Returns the share of each verdict over every range and trial."""
    if draw not in ("split", "resample"):
        raise BadArgument(f"draw {draw!r}: split or resample")
    rng = random.Random(seed)
    aa = dict.fromkeys(VERDICTS, 0)
    planted = {x: dict.fromkeys(VERDICTS, 0) for x in slowdowns}
    n = 0
    sizes = set()
    for times in ranges.values():
        for _ in range(trials):
            if draw == "split":
                xs = list(times)
                rng.shuffle(xs)
                h = len(xs) // 2
                a, b = xs[:h], xs[h : 2 * h]
            else:
                a, b = rng.choices(times, k=len(times)), rng.choices(times, k=len(times))
            sizes.add(len(a))
            aa[decide(a, b, threshold).verdict] += 1
            for x in slowdowns:
                planted[x][decide(a, [v * (1 + x) for v in b], threshold).verdict] += 1
            n += 1
    return {
        "draw": draw,
        "comparisons": n,
        "ranges": len(ranges),
        "trials": trials,
        "threshold": threshold,
        "calls_a_side": sorted(sizes),
        "aa": {v: c / n for v, c in aa.items()},
        "planted": {f"{x:.0%}": {v: c / n for v, c in d.items()} for x, d in planted.items()},
    }
