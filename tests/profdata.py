"""Paths of the real captured reports the tests read."""
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROFILES = ROOT / "profiles"
DATA = ROOT / "tests" / "data"
KNOWN_NSYS = PROFILES / "known" / "known.nsys.sqlite"
KNOWN_NCU = PROFILES / "known" / "known.ncu-rep.xz"  # roofline metric set
KNOWN_NCU_LEAN = DATA / "known" / "known_lean.ncu-rep.xz"
KNOWN_CSV_LEAN = DATA / "known" / "known_lean.raw.csv"  # ncu --import known_lean.ncu-rep --csv --page raw
KNOWN_CUPTI = DATA / "known" / "known.cupti.jsonl"
KNOWN_NSYS_REP = DATA / "known" / "known.nsys-rep"
FIELD_H100 = DATA / "field-h100"  # our own H100 captures of the kinds users have (README there)
# public reports other people captured (read in place, never copied in: ../shared/field-reports/SOURCES.md)
FIELD_REPORTS = ROOT.parent / "shared" / "field-reports"
# more public reports (another engineer's collection, SOURCES.md there)
FIELD_EXTRA = ROOT.parent / "field-extra"


def unpack(name: str, into: Path) -> Path:
    """The set of captures tests/data/NAME/NAME.tar.xz keeps as one file, unpacked under `into`
    as the folder INTO/NAME it was captured as (the reports inside byte for byte as captured,
    still xz'd); unpacked once: a second call returns the same folder."""
    import tarfile

    folder = into / name
    if not folder.is_dir():
        part = into / f".{name}.part"  # a half-unpacked set never stands at `folder`
        with tarfile.open(DATA / name / f"{name}.tar.xz") as t:
            t.extractall(part, filter="data")
        (part / name).rename(folder)
        part.rmdir()
    return folder


def load_runs(root: Path, runs, db_name: str, source: Path = PROFILES):
    """A Store of only `runs` (folders of `source`, profiles/ by default, linked under `root`): a
    small database, fast to load; the caller closes it."""
    from profkit.store.profiles import load_profiles
    from profkit.store.store import Store

    for run in runs:
        (root / run).symlink_to(source / run, target_is_directory=True)
    db = str(root / db_name)
    load_profiles(root, db)
    return Store(db)


def runs_store(name: str, runs):
    """A module-scoped `store` fixture over only `runs` (load_runs), closed after the module: each
    round's pair tests assign it, `store = runs_store("r14", RUNS)`."""
    import pytest

    @pytest.fixture(scope="module")
    def store(tmp_path_factory):
        s = load_runs(tmp_path_factory.mktemp(name), runs, f"{name}.db")
        yield s
        s.close()

    return store


def over_pairs(runs, names: str = "run,before,after,speedup,verdict"):
    """@pytest.mark.parametrize over every pair of a round's `runs` ({run: [(before, after, ...)]}),
    each case named run:before->after."""
    import pytest

    cases = [(run, *p) for run, pairs in runs.items() for p in pairs]
    return pytest.mark.parametrize(names, cases, ids=[f"{c[0]}:{c[1]}->{c[2]}" for c in cases])


def variant_counters(store, run, variant: str, kernel: str | None = None):
    """The counters of each launch of RUN:VARIANT (only the launches of `kernel`, where named)."""
    from profkit.analyses import selection

    counters = store.counters(run)
    (group,) = selection.groups(store, selection.parse(f"{run}:{variant}")).values()
    return [counters[k["kernel_id"]] for k in group.kernels if kernel is None or k["kernel_name"] == kernel]


def pair_row(store, run, before, after, verdict, speedup, after_run=None):
    """profkit compare's row for RUN:BEFORE -> RUN:AFTER of a shipped lab pair (AFTER_RUN:AFTER
    where the after was captured in a run of its own, e.g. after a source edit), its verdict and
    speed-up checked (the rounds' pair tables); a supported verdict names its passing reference
    check."""
    import pytest

    from profkit.analyses.compare import rows

    (r,) = rows(store, f"{run}:{before}", f"{after_run or run}:{after}")
    assert r["verdict"] == verdict, r["why"]
    assert r["speedup"] == pytest.approx(speedup, abs=0.005)
    if verdict == "supported":
        assert "reference check passed" in r["why"] and r["speedup_low"] > 1.0
    return r


def compare_one(store, before, after, by="gpu"):
    """profkit compare's one row for BEFORE -> AFTER (run:variant each), by GPU or host time."""
    from profkit.analyses.compare import rows

    (r,) = rows(store, before, after, by)
    return r


def switch_pair(store, run, variant, by, verdict, speedup, before_us, after_us):
    """compare_one of RUN + "slow":VARIANT -> RUN + "fast":VARIANT (a switch captured off, then on,
    in two runs: rounds 23-24), its verdict, speed-up and both medians checked; returns the row."""
    import pytest

    r = compare_one(store, f"{run}slow:{variant}", f"{run}fast:{variant}", by)
    assert r["verdict"] == verdict, r["why"]
    assert r["speedup"] == pytest.approx(speedup, abs=0.005)
    assert (r["before_us"], r["after_us"]) == (pytest.approx(before_us, abs=0.01), pytest.approx(after_us, abs=0.01))
    return r


def one_kernel_pairs(runs):
    """The pair test of a round whose after is one kernel a call (the fp8 GEMM rounds): each pair's
    verdict and speed-up (pair_row). A round assigns it: `test_round18_pairs = one_kernel_pairs(RUNS)`."""

    @over_pairs(runs)
    def test_pairs(store, run, before, after, speedup, verdict):
        r = pair_row(store, run, before, after, verdict, speedup)
        assert r["after_detail"]["kernels_per_call"] == 1

    return test_pairs


TENSOR_PIPE = "sm__pipe_tensor_type_hmma_hgmma_qgmma_imma_igmma_bmma_bgmma_cycles_active"


def tensor_pipe(store, run, variant):
    """(mean over SMs, busiest SM) of RUN:VARIANT's tensor pipe active cycles, % of elapsed,
    averaged over the captured calls (the fp8 tile rounds' measure of a balanced, busy pipe)."""
    cs = variant_counters(store, run, variant)
    avg = sum(c[TENSOR_PIPE + ".avg.pct_of_peak_sustained_elapsed"] for c in cs) / len(cs)
    top = sum(c[TENSOR_PIPE + ".max.pct_of_peak_sustained_elapsed"] for c in cs) / len(cs)
    return avg, top
