"""Idle time a CUDA graph keeps, as advise items of their own (issue 50 items 4 and 5), on the
ResNet-18 training loop that reads loss.item() every step (tests/data/program-pairs, H100,
2026-12-05): the graph item claims only launch gaps, the host sync is an item that names the
call, its scalar read and its NVTX step, bounded by the gap and by how long it held the host."""
import numpy as np
import pytest

from profkit.analyses import idle, phases
from profkit.analyses.advise import MIN_SPEEDUP, advise
from profkit.store.profiles import load_profiles
from profkit.store.store import Store

RUN = "pair-sync-before-item"


@pytest.fixture(scope="module")
def store(tmp_path_factory, data_set):
    d = tmp_path_factory.mktemp("sync")
    (d / "pairs").mkdir()
    (d / "pairs" / RUN).symlink_to(data_set("program-pairs") / RUN)
    db = str(d / "p.db")
    load_profiles(d / "pairs", db)
    s = Store(db)
    yield s
    s.close()


def test_covered_is_the_overlap_with_merged_intervals():
    us, ue = np.array([0, 10, 30]), np.array([5, 20, 40])
    got = idle._covered(us, ue, np.array([0, 3, 15, 21, 35, 50]), np.array([40, 12, 32, 29, 60, 60]))
    assert got.tolist() == [25, 4, 7, 0, 5, 0]


def test_a_tiny_memset_leaves_a_launch_gap(store):
    win, _ = phases.selected(store, RUN, None)
    g = idle.gaps(store, RUN, win)
    copy = g.cause == "copy"
    # the 4-byte memsets inside the step's launch gaps (23 a step) do not explain them: only copies
    # that ran half a gap or more do
    assert 0 < copy.sum() < 2 * 14
    assert (g.held[copy] >= idle.COPY_SHARE * g.length[copy]).all()
    got = idle.analyse(store, RUN, win)
    assert got.by_cause["launch"] > 0.9 * got.idle_ns - got.by_cause["sync"] - got.by_cause["latency"]


def test_the_host_sync_is_an_item_of_its_own(store):
    a = advise(store, RUN, include_unranged=True)
    (sync,) = [i for i in a.items if i.label == "host_sync"]
    assert sync.kind == "idle" and sync.nvtx_path == "step *"
    assert sync.kernel_name.startswith("cudaStreamSynchronize after a 4-byte device-to-host copy (.item()")
    assert sync.action.startswith("remove the host sync: cudaStreamSynchronize") and "in step *" in sync.action
    (ev,) = sync.evidence
    assert ev["gaps"] == 13  # one a step, in the 14-step steady state (the last step's is after it)
    # bounded by the gaps (the GPU cannot gain more than it idled) and by the host's time in the calls
    assert sync.recoverable_ns <= ev["held_us"] * 1e3 < ev["idle_us"] * 1e3
    assert sync.predicted_speedup == pytest.approx(sync.window_ns / (sync.window_ns - sync.recoverable_ns))
    assert sync.roof_speedup == pytest.approx(sync.predicted_speedup)
    assert 1.005 < sync.predicted_speedup < 1.02
    # the steps' graph item claims the launch gaps inside the steps, not the syncs between them
    graph = next(i for i in a.items if i.kind == "graph")
    assert "sync" not in graph.action and graph.rank < sync.rank
    # an item predicted under 1.05x never ranks above one predicted at or above it
    for hi in a.items:
        for lo in a.items:
            if (hi.predicted_speedup or 0) >= MIN_SPEEDUP and lo.predicted_speedup and lo.predicted_speedup < MIN_SPEEDUP:
                assert hi.rank < lo.rank


def test_a_scope_keeps_only_the_idle_time_inside_it(store):
    """step 5's sync returns after its last kernel: the gap it leaves is between steps 5 and 6,
    outside the scope, so the scope has no host-sync item while the whole run has one a step."""
    whole = advise(store, RUN, include_unranged=True)
    assert any(i.label == "host_sync" for i in whole.items)
    a = advise(store, RUN, scope="step 5")
    assert [i.kind for i in a.items if i.recoverable_ns > 0] == ["graph"]
    assert not any(i.kind == "idle" for i in a.items)


def test_module_loading_ranks_after_recurring_work(tmp_path):
    """The `known` profile's first launches load their modules inside the measured ranges (140 ms of
    cuLibraryLoadData): paid once per process, that item ranks after the kernels' own work
    (raise occupancy, 2.7 ms), which every further call pays."""
    from profdata import PROFILES

    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "known").symlink_to((PROFILES / "known").resolve())
    db = str(tmp_path / "k.db")
    load_profiles(tmp_path / "p", db)
    with Store(db) as s:
        a = advise(s, "known")
    labels = [i.label for i in a.items]
    assert "module_load" in labels
    module = next(i for i in a.items if i.label == "module_load")
    assert module.recoverable_ns > a.items[0].recoverable_ns  # the larger figure, and still not first
    assert a.items[0].label == "occupancy"
    assert all(i.rank < module.rank for i in a.items if (i.predicted_speedup or 0) >= MIN_SPEEDUP
               and i.label != "module_load")
