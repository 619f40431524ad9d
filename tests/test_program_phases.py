"""Phases, CUDA graph replays and idle causes on real programs captured on an H100 (issue 50):
a torch.compile'd GPT-2 training loop with an eager decode after it, an eager Llama decode, the
same decode replayed from CUDA graphs (nsys traced each replay whole), an eager ResNet-18 loop."""
import pytest
from profdata import PROFILES

from profkit.analyses import advise, idle, phases
from profkit.store.ingest import ingest
from profkit.store.store import Store

RUNS = ("gpt2-train-compile", "llama-decode-eager", "llama-decode-cudagraphs", "resnet18-train-eager")


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    db = str(tmp_path_factory.mktemp("programs") / "p.db")
    for run in RUNS:
        ingest(db, [PROFILES / run / f"{run}.nsys.sqlite.xz"], run=run)
    s = Store(db)
    for run in RUNS:
        s.replace_phases(run, phases.rows(phases.detect(s, run)))
    yield s
    s.close()


def test_graph_replays_are_launches_with_their_call(store):
    rows = store.query("SELECT kernel_name, family, api_name, count(*) AS n FROM kernels "
                       "WHERE run = 'llama-decode-cudagraphs' AND family = 'cuda_graph' GROUP BY kernel_name")
    assert [(r["kernel_name"], r["api_name"], r["n"]) for r in rows] == [
        ("CUDA graph 4 (exec 5)", "cudaGraphLaunch_v10000", 71)]


def test_a_graphed_decode_has_its_decode_steps_and_no_graph_advice(store):
    steady = phases.of_run(store, "llama-decode-cudagraphs").steady
    assert steady is not None and steady.steps >= 64
    replays = store.query("SELECT count(*) AS n FROM kernels WHERE run = 'llama-decode-cudagraphs' AND "
                          "family = 'cuda_graph' AND start_ns >= ? AND start_ns < ?", (steady.start_ns, steady.end_ns))
    assert replays[0]["n"] >= steady.steps
    a = advise.advise(store, "llama-decode-cudagraphs")
    assert a.notes[0].startswith(f"steady state: {steady.steps} steps")
    assert not any("CUDA-graph" in it.action or "in a CUDA graph" in it.action for it in a.items)
    # the host waits on a cudaStreamSynchronize after each replay: a graph keeps that idle time, so the
    # replay-gap item claims only the rest, and removing the sync is the first item
    gap = next(it for it in a.items if it.kind == "graph")
    assert gap.evidence[0]["kept_by_graph_us"] > 10_000 and "between CUDA graph replays" in gap.action
    top = a.items[0]
    assert (top.kind, top.label, top.kernel_name) == ("idle", "host_sync", "cudaStreamSynchronize")
    assert top.action.startswith("remove the host sync") and top.predicted_speedup > gap.predicted_speedup >= 1.05
    (ev,) = top.evidence
    assert top.recoverable_ns <= min(ev["held_us"], ev["idle_us"]) * 1e3


def test_host_calls_are_only_the_idle_kinds(store):
    kinds = {r["kind"] for r in store.query("SELECT DISTINCT kind FROM host_calls")}
    assert kinds <= {"sync", "alloc", "module", "memcpy", "memset"} and {"sync", "alloc", "module"} <= kinds
    names = {r["name"] for r in store.query("SELECT DISTINCT name FROM host_calls")}
    assert "cudaLaunchKernel" not in names and "cuLibraryLoadData" in names
    # the decode's once-a-step copy: 8 bytes from pageable host memory to the GPU
    htod = store.query("SELECT bytes, pageable, count(*) AS n FROM gpu_copies WHERE run = 'llama-decode-eager' "
                       "AND direction = 'HtoD' GROUP BY bytes, pageable ORDER BY n DESC")
    assert htod[0]["bytes"] == 8 and htod[0]["pageable"] == 1 and htod[0]["n"] >= 71


def test_idle_causes_on_the_steady_steps(store):
    for run, cause in (("llama-decode-cudagraphs", "sync"), ("llama-decode-eager", "launch")):
        win, _ = phases.selected(store, run, None)
        got = idle.analyse(store, run, win)
        assert idle.main_cause(got) == cause, (run, got.by_cause)
    eager = idle.analyse(store, "llama-decode-eager", phases.selected(store, "llama-decode-eager", None)[0])
    assert eager.gaps["sync"] >= 60  # the sync after each step's token read
    whole = idle.analyse(store, "gpt2-train-compile")
    assert whole.by_cause["module"] > 0 and whole.note == ""


def test_a_compiled_training_loop_keeps_compile_and_decode_apart(store):
    ph = phases.detect(store, "gpt2-train-compile")
    kinds = [p.kind for p in ph.phases]
    assert "compile" in kinds
    steady = ph.steady
    assert steady.steps == 3
    training_end = max(p.end_ns for p in ph.phases if p.kind == "compile" and p.start_ns < steady.start_ns)
    assert steady.start_ns >= training_end  # steps 2-4: after step 1's autotuning
    decode = [p for p in ph.phases if p.kind == "repeated" and p.start_ns > steady.end_ns and p.steps >= 20]
    assert decode and decode[0].launches >= 1800
    # advise's top items are steady-state work: none of its kernels ran only while autotuning
    a = advise.advise(store, "gpt2-train-compile")
    tuned = {r["short_name"] for p in ph.phases if p.kind == "compile" for r in store.query(
        "SELECT DISTINCT short_name FROM kernels WHERE run = 'gpt2-train-compile' AND start_ns >= ? AND start_ns < ?",
        (p.start_ns, p.end_ns))}
    steady_names = {r["short_name"] for r in store.query(
        "SELECT DISTINCT short_name FROM kernels WHERE run = 'gpt2-train-compile' AND start_ns >= ? AND start_ns < ?",
        (steady.start_ns, steady.end_ns))}
    for it in a.items[:5]:
        if it.kind == "range":
            assert it.kernel_name.split(",")[0].strip() in steady_names
            assert it.kernel_name.split(",")[0].strip() not in tuned - steady_names


def test_the_column_path_loads_the_same_replays_and_host_calls(store, tmp_path, monkeypatch):
    from profkit.parsers import nsys_sqlite

    monkeypatch.setattr(nsys_sqlite, "BULK_MIN_ROWS", 0)
    db = str(tmp_path / "bulk.db")
    run = "llama-decode-cudagraphs"
    ingest(db, [PROFILES / run / f"{run}.nsys.sqlite.xz"], run=run)
    q = ("SELECT kernel_name, api_name, start_ns, end_ns, stream FROM kernels WHERE run = ? AND family = 'cuda_graph' "
         "ORDER BY start_ns")
    calls = "SELECT kind, name, start_ns, end_ns, pid, tid FROM host_calls WHERE run = ? ORDER BY start_ns, name"
    copies = "SELECT * FROM gpu_copies WHERE run = ? ORDER BY start_ns, kind"
    with Store(db) as bulk:
        assert len(bulk.query(q, (run,))) == 71
        for sql in (q, calls, copies):
            assert bulk.query(sql, (run,)) == store.query(sql, (run,))


def test_the_steady_state_is_never_an_autotuners_benchmark_loop(tmp_path):
    """nsys --pytorch=autograd-shapes-nvtx of benchmarks/programs/fusion_ops.py (H100,
    2026-12-06; tests/data/opmodel-h100): Inductor's autotuner benchmarks each candidate in a
    loop, 8 repeats of 26 launches inside `CachingAutotuner.benchmark_all_configs`, the longest
    periodic stretch of the run. The steady state is the program's own repeated calls, and advise
    names the eager RMSNorm's fusion first."""
    from profdata import DATA

    db = str(tmp_path / "p.db")
    ingest(db, [DATA / "opmodel-h100" / "fusion-autograd-shapes.nsys.sqlite.xz"], run="ag")
    with Store(db) as s:
        ph = phases.detect(s, "ag")
        tuned = s.query("SELECT start_ns FROM kernels WHERE run = 'ag' AND nvtx_path LIKE '%CachingAutotuner%'")
        assert len(tuned) > 500 and ph.steady is not None
        assert not any(ph.steady.start_ns <= r["start_ns"] < ph.steady.end_ns for r in tuned)
        assert any(p.kind == "compile" for p in ph.phases)
        s.replace_phases("ag", phases.rows(ph))
        top = advise.advise(s, "ag").items[0]
    assert top.nvtx_path == "rmsnorm.eager" and "from tensor identity" in top.how
