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
    pairs = selection.pair(store, selection.parse("rmsnorm-eager-vs-triton-h200:eager"),
                           selection.parse("rmsnorm-eager-vs-triton-h200:triton"))
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
