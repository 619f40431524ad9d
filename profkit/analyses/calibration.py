"""Was the advice right? For a before/after pair, the gain `advise` predicted for the BEFORE
side against the gain `compare` measured between the two.

Predicted: over the advise items of the BEFORE range (its scope), per call,
    predicted speed-up = time / (time - recoverable)
where time and recoverable are GPU time for operator (range) items and the GPU window for
graph items: a graph replay does not shorten kernels, it closes the gaps between them. The
pair's measure follows the fix: `gpu` pairs are compared on GPU time per call (compare's
speed-up), `span` pairs on the window per call (first kernel start to last kernel end).
ratio = predicted / measured (1.0: exact; > 1: advise promised more than the fix gave).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from profkit.analyses import timeline as tl
from profkit.analyses.advise import advise
from profkit.analyses.compare import compare
from profkit.analyses.selection import key_of, parse
from profkit.store.store import Store

OFF_BY = 0.25  # a prediction further than this from the measured gain needs its reason


@dataclass
class Calibration:
    before: str
    after: str
    measure: str  # gpu | span
    range: str
    predicted: float | None
    measured: float
    recoverable_us: float
    time_us: float
    basis: str  # what the prediction rests on (the top item's how)
    why: str = ""  # where |ratio - 1| > OFF_BY: the reason, from the evidence

    @property
    def ratio(self) -> float | None:
        return None if self.predicted is None else self.predicted / self.measured

    @property
    def within(self) -> bool:
        return self.ratio is not None and abs(self.ratio - 1) <= OFF_BY

    def row(self) -> dict:
        return {**asdict(self), "ratio": self.ratio, "within_25pct": self.within}


def _windows(store: Store, selector: str) -> dict[str, tuple[str, dict]]:
    """Repeated calls of a selection by pairing key: key -> (path, timeline row), with child
    ranges' kernels included (a step's window holds its operators)."""
    sel = parse(selector)
    out = {}
    for r in tl.calls(tl.ranges(store, sel.run)):
        k = key_of(r["path"], sel.component)
        if k is not None:
            out[k] = (r["path"], r)
    return out


def calibrate(
    store: Store, before: str, after: str, measure: str = "gpu", peaks: list[dict] | None = None, why: str = ""
) -> list[Calibration]:
    """One row per range the pair shares: compare's pairing on GPU time (`gpu`), or the
    repeated calls (timeline.calls) on their window (`span`)."""
    out = []
    if measure == "span":
        bw, aw = _windows(store, before), _windows(store, after)
        for key in (k for k in bw if k in aw):
            (path, b), (_, a) = bw[key], aw[key]
            time = b["window_ns"] / b["instances"] / 1e3
            measured = time / (a["window_ns"] / a["instances"] / 1e3)
            out.append(_row(store, before, after, measure, key, path, time, measured, "graph", peaks, why))
        return out
    for c in compare(store, before, after):
        row = _row(
            store, before, after, measure, c.key, c.before.path, c.before.median_us, c.speedup, "range", peaks, why
        )
        if not row.why and row.ratio is not None and not row.within:
            row.why = _why(store, parse(after).run, c.after.path, row)
        out.append(row)
    return out


def _why(store: Store, run: str, path: str, row: Calibration) -> str:
    """What the after side's own label says about the gap left to the predicted floor."""
    from profkit.analyses.classify import label_rows

    ratio = row.ratio
    assert ratio is not None  # asked only of a row with a ratio (calibrate)
    ids = {
        k["kernel_id"]: k["duration_ns"] or 0
        for k in store.query("SELECT kernel_id, duration_ns FROM kernels WHERE run = ? AND nvtx_path = ?", (run, path))
    }
    share: dict[tuple, float] = {}
    for r in label_rows(store, run):
        if r["kernel_id"] in ids:
            key = (r["label"], r["reason"])
            share[key] = share.get(key, 0.0) + ids[r["kernel_id"]]
    if not share:
        return f"the fix reached {100 / ratio:.0f} % of the predicted floor"
    label, reason = max(share, key=share.__getitem__)
    return f"the fix reached {100 / ratio:.0f} % of the predicted floor: it is {label}-bound ({reason})"


def _row(store, before, after, measure, key, path, time, measured, kind, peaks, why) -> Calibration:
    adv = advise(store, parse(before).run, scope=path, peaks=peaks)
    items = [i for i in adv.items if i.kind == kind]
    calls = max((i.calls for i in items), default=1) or 1
    rec = sum(i.recoverable_ns for i in items) / calls / 1e3
    known = any(i.floor_ns is not None for i in items)
    predicted = time / (time - rec) if known and time > rec else None
    basis = items[0].how if items else "no item"
    return Calibration(before, after, measure, key, predicted, measured, rec, time, basis, why)
