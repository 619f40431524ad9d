"""Phases on real timelines: steps from ranges (a torch.profiler trace and the same program under
nsys, both H100), steps from the periodic kernel sequence alone (the same trace with its ranges
ignored, and an unannotated Hugging Face decode), and what analyses then leave out."""
import lzma
import shutil

import numpy as np
import pytest
from profdata import DATA, PROFILES

from profkit.analyses import advise, phases
from profkit.store.ingest import ingest
from profkit.store.store import Store

TF = DATA / "kineto-h100" / "tf.kineto.json.gz"
TF_NSYS = DATA / "kineto-h100" / "tf.nsys.sqlite.xz"
DECODE = PROFILES / "hf-llama-decode"


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("phases")
    nsys = tmp / "tf.nsys.sqlite"
    with lzma.open(TF_NSYS) as src, open(nsys, "wb") as dst:
        shutil.copyfileobj(src, dst)
    db = str(tmp / "p.db")
    ingest(db, [TF], run="tf-kineto")
    ingest(db, [nsys], run="tf-nsys")
    ingest(db, [DECODE])
    s = Store(db)
    for run in s.runs():
        s.replace_phases(run, phases.rows(phases.detect(s, run)))
    yield s
    s.close()


def test_steps_from_ranges_leave_the_slow_first_step_out(store):
    ph = phases.detect(store, "tf-kineto")
    assert [(p.name, p.kind) for p in ph.phases][-2:] == [("warm-up", "warmup"), ("steps", "steps")]
    steady = ph.steady
    assert steady.steps == 2 and "ranges named like steps" in steady.how
    warm = ph.find("warm-up")
    assert warm.steps == 1 and warm.how.startswith("step 0, slower than 1.5x")
    # the warm-up step really is slower: its GPU window is over 1.5x a steady step's
    assert (warm.end_ns - warm.start_ns) > 1.5 * steady.step_ns


def test_the_same_program_gives_the_same_steps_under_both_tracers(store):
    """Under nsys the first step is not slow (torch.profiler's own start-up stretched it): all
    three steady; a step holds the same launches under both tracers."""
    a, b = phases.detect(store, "tf-kineto").steady, phases.detect(store, "tf-nsys").steady
    assert b.steps == 3 and "all steady" in b.how
    assert a.launches // a.steps == b.launches // b.steps == 303


def test_the_periodic_sequence_alone_finds_the_step(store):
    """Ranges ignored: the kernel names in launch order repeat with the step's own length."""
    t = phases._timeline(store, "tf-kineto")
    got = phases._periodic(t["ids"])
    steady = phases.detect(store, "tf-kineto").steady
    assert got is not None
    period, a, b = got
    assert period == steady.launches // steady.steps
    assert b - a >= 2 * period


def test_an_unannotated_decode_gets_its_decode_steps(store):
    ph = phases.detect(store, "hf-llama-decode")
    steady = ph.steady
    assert "periodic kernel sequence" in steady.how
    assert steady.steps == 7 and steady.launches == 7 * 358
    assert ph.phases[0].name == "startup"  # the prefill and set-up before the loop
    # the phases tile the run: every timeline launch in exactly one
    assert sum(p.launches for p in ph.phases) == len(phases._timeline(store, "hf-llama-decode")["ids"])


def test_stored_phases_read_back_as_found(store):
    got = store.query("SELECT phase, kind, steady FROM phases WHERE run = 'hf-llama-decode' ORDER BY seq")
    assert [r["phase"] for r in got] == [p.name for p in phases.detect(store, "hf-llama-decode").phases]
    assert sum(r["steady"] for r in got) == 1


def test_advise_defaults_to_the_steady_state_and_says_so(store):
    steady = advise.advise(store, "hf-llama-decode")
    whole = advise.advise(store, "hf-llama-decode", phase="all")
    assert steady.notes[0].startswith("steady state: 7 steps") and steady.notes[0].endswith("--phase all for everything")
    assert not any(n.startswith("steady state") for n in whole.notes)
    assert steady.gpu_ns < whole.gpu_ns
    assert steady.gpu_ns == pytest.approx(phases.detect(store, "hf-llama-decode").steady.gpu_ns)


def test_a_named_phase_and_an_unknown_one(store):
    a = advise.advise(store, "hf-llama-decode", phase="startup")
    assert a.notes[0].startswith("startup")
    from profkit.core.errors import BadArgument
    with pytest.raises(BadArgument, match="no phase 'decode'"):
        advise.advise(store, "hf-llama-decode", phase="decode")


def test_autotune_bursts_need_several_configurations_or_fills():
    """A benchmark loop runs one kernel many times in a row under several configs; an eager
    optimizer's per-parameter launches repeat one kernel under one config and are no burst."""
    n = 12
    t = {"ids": np.array([0] * n + [1] * n), "config": np.array([1, 2, 3] * 4 + [5] * n),
         "short": np.array(["triton_red_fused"] * n + ["add_"] * n, dtype=object),
         "names": np.array(["triton_red_fused_0", "vectorized_elementwise_kernel"], dtype=object)}
    assert phases._bursts(t, 0, 2 * n) == [(0, n)]
