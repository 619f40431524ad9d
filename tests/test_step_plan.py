"""`profkit capture --step N` by launch index (capture/step_plan.py, core/sampling.py), planned on
a real capture: the eager ResNet-18 loop of tests/data/program-pairs (H100, nsys, 2026-12-05)
pushes `step N` on its main thread while autograd launches the backward from its own thread.
ncu's NVTX filter reads the launching thread's ranges and would measure the forward alone; the
launch-index window holds the whole step."""
import pytest

from profkit.capture.step_plan import step_window
from profkit.core.errors import BadArgument
from profkit.core.sampling import FIELDS, Spec, ncu_filter_args, plan, select
from profkit.store.profiles import load_profiles
from profkit.store.store import Store

RUN = "pair-sync-before-item"


@pytest.fixture(scope="module")
def store(tmp_path_factory, data_set):
    d = tmp_path_factory.mktemp("step")
    (d / "pairs").mkdir()
    (d / "pairs" / RUN).symlink_to(data_set("program-pairs") / RUN)
    db = str(d / "p.db")
    load_profiles(d / "pairs", db)
    s = Store(db)
    yield s
    s.close()


def _timeline(s: Store):
    """The timeline's launches as capture's sampling rows (the launching thread's own path), with
    each one's id and the step path the kernels view gives it (inherited from the lead thread)."""
    src = s.timeline_source(RUN)
    rows = s.conn.execute(
        f"SELECT l.id, k.nvtx_path, {', '.join('l.' + f for f in FIELDS)} FROM launch l "
        "JOIN kernels k ON k.kernel_id = l.id WHERE l.run = ? AND l.source = ? AND l.timeline_id IS NULL ORDER BY l.id",
        (RUN, src),
    ).fetchall()
    return [r[0] for r in rows], [r[1] for r in rows], [tuple(r[2:]) for r in rows]


def test_the_step_is_a_window_of_launch_indexes(store):
    w = step_window(store, RUN, "step 5")
    # 456 launches a step: 214 from the main thread (the forward, the loss), 242 from autograd's
    assert (w.count, w.members, w.other_threads, w.others) == (456, 456, 242, 0)
    ids, effective, rows = _timeline(store)
    chosen = select(rows, Spec(per_config=False, launches=[w.first, w.count]))
    assert len(chosen) == 456
    assert all(effective[i] == "step 5" or effective[i].startswith("step 5/") for i in chosen)
    assert {i for i, p in enumerate(effective) if p and p.split("/")[0] == "step 5"} == set(chosen)
    # what ncu's NVTX filter would have measured: the launching thread's own ranges, the forward only
    by_nvtx = select(rows, Spec(per_config=False, ranges=["step 5"]))
    assert len(by_nvtx) == 214 and set(by_nvtx) < set(chosen)
    assert w.describe().startswith("step 5: launches ") and "242 of them from another thread" in w.describe()


def test_ncu_is_told_the_window(store):
    w = step_window(store, RUN, "step 5")
    args = ncu_filter_args(Spec(per_config=False, launches=[w.first, w.count]))
    assert args == ["--launch-skip-before-match", str(w.first), "--launch-count", "456"]
    assert "--nvtx-include" not in args


def test_a_kernel_cap_counts_only_the_kernels_kept(store):
    w = step_window(store, RUN, "step 5")
    _, effective, rows = _timeline(store)
    spec = Spec(per_config=False, launches=[w.first, w.count])
    p = plan(rows, spec, "lean", max_kernels=100)
    assert 0 < p.profiled <= 100 and spec.names and spec.launches[1] == p.profiled
    chosen = select(rows, spec)
    # still step 5's launches only: ncu's count runs over the kernels named, its skip over all
    assert all(effective[i].split("/")[0] == "step 5" for i in chosen)
    assert {rows[i][1] for i in chosen} == set(spec.names)
    assert "--kernel-name" in ncu_filter_args(spec)


def test_a_step_the_timeline_lacks_is_refused(store):
    with pytest.raises(BadArgument, match="no launch of the timeline is inside the range 'step 99'"):
        step_window(store, RUN, "step 99")
