"""Selectors pair before/after NVTX ranges on the shipped H200 profiles."""

import pytest
from profdata import PROFILES

from profkit.analyses import selection
from profkit.core.errors import BadArgument, NoSuchRun
from profkit.store.profiles import load_profiles
from profkit.store.store import Store


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    db = str(tmp_path_factory.mktemp("sel") / "p.db")
    load_profiles(PROFILES, db)
    s = Store(db)
    yield s
    s.close()


def test_parse():
    assert selection.parse("r") == selection.Selector("r", None)
    assert selection.parse("r:triton") == selection.Selector("r", "triton")
    for bad in ("", ":x", "r:"):
        with pytest.raises(BadArgument):
            selection.parse(bad)
    # a component is one whole range name, and TensorRT's hold '/'
    assert selection.parse("r:/conv1/Conv + /relu/Relu") == selection.Selector("r", "/conv1/Conv + /relu/Relu")


def test_names_holding_a_slash_are_one_component():
    """Matching runs on the structured path (kernels.nvtx_names): a name holding '/' is one
    component, and its pieces are none (issue 15 item 6)."""
    import json

    from profkit.analyses.timeline import _under

    names = ["engine", "/conv1/Conv + /relu/Relu", "fp16"]
    row = {"nvtx_names": json.dumps(names), "nvtx_path": "/".join(names)}
    assert selection.names(row) == names
    assert selection.key_of(names, "/conv1/Conv + /relu/Relu") == "engine/fp16"
    assert selection.key_of(names, "relu") is None  # the readable path's pieces are not names
    assert _under(names, "engine//conv1/Conv + /relu/Relu") and _under(names, "engine")
    assert not _under(names, "engine//conv1")  # not a name boundary
    assert _under(names, json.dumps(names[:2])) and not _under(names, '["engine", "/conv1"]')


def test_key_of():
    assert selection.key_of("rmsnorm/eager/s", "eager") == "rmsnorm/s"
    assert selection.key_of("rmsnorm/eager/s", "triton") is None
    assert selection.key_of("rmsnorm/eager/s", None) == "rmsnorm/eager/s"


def test_variants_of_one_run_pair_on_op_and_shape(store):
    pairs = selection.pair(
        store,
        selection.parse("rmsnorm-eager-vs-triton-h200:eager"),
        selection.parse("rmsnorm-eager-vs-triton-h200:triton"),
    )
    assert [p.key for p in pairs] == ["rmsnorm/qwen7b-t4096"]
    p = pairs[0]
    # eager: 8 PyTorch kernels per call, 3 calls; triton: one kernel per call
    assert len(p.before.kernels) == 24 and len(p.after.kernels) == 3
    assert [len(i) for i in selection.iterations(p.before.kernels)] == [8, 8, 8]
    assert [len(i) for i in selection.iterations(p.after.kernels)] == [1, 1, 1]


def test_errors(store):
    with pytest.raises(NoSuchRun):
        selection.groups(store, selection.parse("nope"))
    with pytest.raises(BadArgument):
        selection.groups(store, selection.parse("known:nothing-here"))
    with pytest.raises(BadArgument):
        selection.pair(store, selection.parse("known"), selection.parse("known"))
    with pytest.raises(BadArgument):  # no shared range
        selection.pair(store, selection.parse("known"), selection.parse("cuda-vs-triton-h200"))


def test_iterations_without_repeat():
    ks = [{"kernel_name": n} for n in "abc"]
    assert selection.iterations(ks) == [ks]
    assert selection.iterations([]) == []


def _same_groups(s, sel):
    """launch_groups (columns) against groups (rows): the same keys, paths, launches in the same
    order, timestamps present alike, the same range instance each; errors alike."""
    try:
        rows = selection._groups(s, sel)
    except (BadArgument, NoSuchRun) as e:
        with pytest.raises(type(e)) as got:
            selection._launch_groups(s, sel)
        assert str(got.value) == str(e)
        return 0
    cols = selection._launch_groups(s, sel)
    assert list(cols) == list(rows)
    for key, g in rows.items():
        c = cols[key]
        assert c.path == g.path
        assert c.kernel_id.tolist() == [k["kernel_id"] for k in g.kernels]
        assert c.call.tolist() == [selection.NO_CALL if k["call"] is None else k["call"] for k in g.kernels]
        assert (c.start is None) == any(k["start_ns"] is None or k["end_ns"] is None for k in g.kernels)
        assert (c.api_start is None) == any(k["api_start_ns"] is None for k in g.kernels)
        names = {}
        assert [names.setdefault(n, k["kernel_name"]) for n, k in zip(c.name.tolist(), g.kernels)] == [
            k["kernel_name"] for k in g.kernels
        ]
    return len(rows)


def test_launch_groups_are_the_groups_as_columns(store):
    """Every run of profiles/ and each of its variants: compare reads the columns, gate and
    roofline the rows; both must be the same selection (ddp-2gpu holds inherited launches)."""
    checked = 0
    for run in store.runs():
        paths = [
            r["nvtx_path"]
            for r in store.query(
                "SELECT DISTINCT nvtx_path FROM kernels WHERE run = ? AND nvtx_path IS NOT NULL", (run,)
            )
        ]
        for comp in [None, *selection.variants(paths)[:4], "no-such-part"]:
            checked += _same_groups(store, selection.Selector(run, comp))
    assert checked > 100
    assert store.query("SELECT count(*) AS n FROM launch_inherit")[0]["n"] > 0


def test_launch_groups_read_the_ranges_a_stretch_at_a_time(store, monkeypatch):
    """compare reads a run's ranges a few row ids at a time (all 16 M at once hold gigabytes):
    with stretches of 5 ids, a launch's instance and the ranges that started later than it
    fall in other stretches than its own, and the instances are still the rows' ones."""
    spans = {run: b[1] - b[0] + 1 for run in store.runs() if (b := selection.id_bounds(store, "nvtx_event", run))}
    smallest = min((r for r in spans if spans[r] > 50), key=spans.get)
    checked = 0
    for run, span in spans.items():
        # seven stretches a run (a query each), and stretches of 5 ids on the smallest run
        monkeypatch.setattr(selection._instances_of, "__defaults__", (5 if run == smallest else max(5, span // 7),))
        checked += _same_groups(store, selection.Selector(run, None))
    assert checked > 20


def test_launch_groups_read_a_launchs_own_path_text(tmp_path, store):
    """A launch whose path text is its own (launch_nvtx: a writer's text that is not its path's)
    is grouped under that text, with its path's names, as the kernels view shows it."""
    import shutil

    db = tmp_path / "own.db"
    store.conn.commit()
    shutil.copy(store.path, db)
    s = Store(str(db))
    try:
        run = "rmsnorm-eager-vs-triton-h200"
        ids = [
            r["kernel_id"]
            for r in s.query(
                "SELECT kernel_id FROM kernels WHERE run = ? AND nvtx_path IS NOT NULL ORDER BY kernel_id", (run,)
            )
        ]
        with s.conn:
            s.conn.executemany(
                "INSERT INTO launch_nvtx (launch_id, nvtx_range, nvtx_path) VALUES (?, ?, ?)",
                [(k, "mine", "rmsnorm/mine/qwen7b-t4096") for k in ids[:5]],
            )
        assert _same_groups(s, selection.Selector(run, None)) > 1
        paths = {g.path for g in selection._launch_groups(s, selection.Selector(run, None)).values()}
        assert "rmsnorm/mine/qwen7b-t4096" in paths
        _same_groups(s, selection.Selector(run, "mine"))  # (keys come from the names: no part 'mine', alike)
    finally:
        s.close()
