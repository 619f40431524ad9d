"""Ordinary programs profkit never saw, captured by `profkit capture -- COMMAND` on an H100
(benchmarks/results/capture.md): a Hugging Face decoder and a plain CUDA C program, no NVTX at
all. The timeline holds every launch, ncu measured one launch per kernel and launch
configuration, and every other launch is labelled through its measured sibling."""
import json

import pytest
from profdata import PROFILES

from profkit.analyses.advise import advise
from profkit.analyses.classify import classify
from profkit.store.ingest import ingest
from profkit.store.profiles import capture_meta, report_files, sampled_facts
from profkit.store.store import Store

# run -> (timeline launches, ncu launches, configurations)
EXPECTED = {"hf-llama-decode": (3369, 74), "cuda-vector-ops": (656, 7)}


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("programs") / "p.db")
    for run in EXPECTED:
        files = report_files(PROFILES / run)
        ingest(path, files, run=run, facts=sampled_facts(files, capture_meta(PROFILES / run)))
    return path


@pytest.mark.parametrize("run", list(EXPECTED))
def test_every_launch_is_labelled_through_a_measured_sibling(db, run):
    launches, measured = EXPECTED[run]
    with Store(db) as s:
        rows = classify(s, run)
        n = s.query("SELECT count(*) n, count(sampled_from) sampled, count(nvtx_path) ranged FROM kernels "
                    "WHERE run = ?", (run,))[0]
        own = s.counters(run, ["gpu__time_duration.sum"], sampled=False)
    assert (n["n"], len(own), n["sampled"], n["ranged"]) == (launches, measured, launches - measured, 0)
    assert len(rows) == launches and not [r for r in rows if r["label"] == "unknown"]
    sampled = [r for r in rows if "sampled_from" in json.loads(r["evidence"])]
    assert len(sampled) == launches - measured
    assert all("the sampled launch of this kernel and configuration" in r["reason"] for r in sampled)


def test_the_decoder_is_launch_bound_and_advise_says_so_first(db):
    with Store(db) as s:
        a = advise(s, "hf-llama-decode")
    top = a.items[0]
    assert (top.kind, top.nvtx_path, top.label) == ("graph", None, "launch_overhead")
    (ev,) = top.evidence
    assert top.launches == 2506 and ev["short_gaps"] > 2000  # the steady state: one short gap after nearly every launch
    kept = ev.get("kept_by_graph_us", 0.0) * 1e3  # idle a graph keeps: the cause items' own
    assert top.recoverable_ns == pytest.approx(ev["idle_short_us"] * 1e3 - ev["short_gaps"] * a.device_gap_ns - kept)
    # the short loop still loads modules for the decode's new kernels in each step (cuLibraryLoadData):
    # an item of its own, bounded by the time the host spent loading (the gaps around it are Python)
    (mod,) = [i for i in a.items if i.label == "module_load"]
    assert mod.kind == "idle" and mod.kernel_name == "cuLibraryLoadData" and "warm up" in mod.action
    (mev,) = mod.evidence
    assert mod.recoverable_ns <= mev["held_us"] * 1e3 < mev["idle_us"] * 1e3
    assert mod.predicted_speedup == pytest.approx(mod.window_ns / (mod.window_ns - mod.recoverable_ns))
    # under 1.05x: it ranks after every item predicted at or above it
    assert all(i.rank < mod.rank for i in a.items if (i.predicted_speedup or 0) >= 1.05)
    kernel_items = [i for i in a.items if i.kind == "range"]
    assert "through the measured launch of their kernel and configuration (sampled_from)" in kernel_items[0].how
