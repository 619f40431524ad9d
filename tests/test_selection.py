"""Selectors pair before/after NVTX ranges on the shipped H200 profiles."""
import pytest

from profkit import selection
from profkit.profiles import load_profiles
from profkit.errors import BadArgument, NoSuchRun
from profkit.store import Store

from profdata import PROFILES


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
    for bad in ("", ":x", "r:", "r:a/b"):
        with pytest.raises(BadArgument):
            selection.parse(bad)


def test_key_of():
    assert selection.key_of("rmsnorm/eager/s", "eager") == "rmsnorm/s"
    assert selection.key_of("rmsnorm/eager/s", "triton") is None
    assert selection.key_of("rmsnorm/eager/s", None) == "rmsnorm/eager/s"


def test_variants_of_one_run_pair_on_op_and_shape(store):
    pairs = selection.pair(store, selection.parse("rmsnorm-llama8b-t32768:eager"),
                           selection.parse("rmsnorm-llama8b-t32768:triton"))
    assert [p.key for p in pairs] == ["rmsnorm/llama8b-t32768"]
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
        selection.pair(store, selection.parse("known"), selection.parse("swiglu-llama8b-t4096"))


def test_iterations_without_repeat():
    ks = [{"kernel_name": n} for n in "abc"]
    assert selection.iterations(ks) == [ks]
    assert selection.iterations([]) == []
