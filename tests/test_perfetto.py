"""profkit export-perfetto on real runs: the file is a trace-event JSON that Perfetto reads,
with every timeline launch once on its stream's track, times exact to the nanosecond, and
slices that nest on every thread track."""
import json
import os
import shutil
import subprocess
import sys
from collections import Counter, defaultdict
from decimal import Decimal

import pytest
from profdata import ROOT, runs_store

from profkit.analyses import phases
from profkit.outputs import perfetto

RUNS = ["hf-llama-decode", "ddp-2gpu"]
store = runs_store("perfetto", RUNS)


@pytest.fixture(scope="module")
def traces(store, tmp_path_factory):
    out = {}
    for run in RUNS:
        path = tmp_path_factory.mktemp("perfetto") / f"{run}.json"
        perfetto.export(store, run, path)
        with open(path, encoding="utf-8") as f:  # Decimal: the file's own digits, no float rounding
            out[run] = (path, json.load(f, parse_float=Decimal))
    return out


def _ns(us: Decimal) -> int:
    ns = us * 1000
    assert ns == ns.to_integral_value(), us  # three decimals at most: whole nanoseconds
    return int(ns)


def _slices(doc):
    return [e for e in doc["traceEvents"] if e["ph"] == "X"]


@pytest.mark.parametrize("run", RUNS)
def test_every_launch_once_on_its_stream_exact_to_the_ns(store, traces, run):
    _, doc = traces[run]
    assert doc["displayTimeUnit"] == "ns"
    launches = {r["kernel_id"]: r for r in store.query(
        "SELECT kernel_id, start_ns, end_ns, stream, device, rank, short_name, kernel_name FROM kernels "
        "WHERE run = ? AND start_ns IS NOT NULL", (run,))}
    kernels = [e for e in _slices(doc) if e["cat"].startswith("kernel")]
    ids = Counter(e["args"]["kernel_id"] for e in kernels)
    assert set(ids) == set(launches) and max(ids.values()) == 1
    names = _names(doc)
    for e in kernels:
        k = launches[e["args"]["kernel_id"]]
        assert _ns(e["ts"]) == k["start_ns"] and _ns(e["dur"]) == k["end_ns"] - k["start_ns"]
        process, thread = names[e["pid"], None], names[e["pid"], e["tid"]]
        assert process.startswith(f"GPU {k['device']}") and (k["rank"] is None or f"rank {k['rank']}" in process)
        assert thread.split(" (")[0] == f"stream {k['stream']}"
        assert e["name"] == (k["short_name"] or k["kernel_name"])


def _names(doc) -> dict:
    """{(pid, None): process name, (pid, tid): thread name} from the metadata events."""
    out = {}
    for e in doc["traceEvents"]:
        if e["ph"] == "M" and e["name"] == "process_name":
            out[e["pid"], None] = e["args"]["name"]
        elif e["ph"] == "M" and e["name"] == "thread_name":
            out[e["pid"], e["tid"]] = e["args"]["name"]
    return out


@pytest.mark.parametrize("run", RUNS)
def test_slices_nest_on_every_thread_and_every_track_is_named(traces, run):
    _, doc = traces[run]
    names = _names(doc)
    by_thread = defaultdict(list)
    for e in _slices(doc):
        assert (e["pid"], None) in names and (e["pid"], e["tid"]) in names
        assert _ns(e["dur"]) >= 0
        by_thread[e["pid"], e["tid"]].append((_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"])))
    assert len(by_thread) >= 3
    for key, spans in by_thread.items():
        assert _nested(spans), names[key]


def _nested(spans) -> bool:
    open_ends: list[int] = []
    for s, e in sorted(spans, key=lambda x: (x[0], -x[1])):
        while open_ends and open_ends[-1] <= s:
            open_ends.pop()
        if open_ends and e > open_ends[-1]:
            return False
        open_ends.append(e)
    return True


def test_nesting_check_and_lanes_catch_straddling_slices():
    assert not _nested([(0, 10), (5, 15)]) and _nested([(0, 10), (0, 4), (4, 10), (10, 12)])
    a, b, c = (perfetto.Slice(n, s, d, "nvtx") for n, s, d in (("a", 0, 10), ("b", 5, 10), ("c", 2, 3)))
    got = perfetto.lanes([a, b, c])
    assert [[s.name for s in lane] for lane in got] == [["a", "c"], ["b"]]


def test_labels_roofline_and_advice_in_the_args(traces):
    _, doc = traces["hf-llama-decode"]
    kernels = [e for e in _slices(doc) if e["cat"].startswith("kernel")]
    assert all(e["args"].get("label") and e["args"].get("reason") for e in kernels)
    assert all(e["cat"] == "kernel," + e["args"]["label"] for e in kernels)
    # the unannotated program's advice: its launch gaps cover every launch; an item per kernel
    # name, except names advise drops (nothing recoverable)
    assert all("launch_gap_advice_rank" in e["args"] for e in kernels)
    ranked = [e for e in kernels if "advice_rank" in e["args"]]
    assert len(ranked) > 0.9 * len(kernels)
    with_pct = [e for e in kernels if "roofline_pct" in e["args"]]
    assert len(with_pct) > len(kernels) // 2 and all(0 < e["args"]["roofline_pct"] <= 100.5 for e in with_pct)


@pytest.mark.parametrize("run", RUNS)
def test_phases_and_idle_tracks(store, traces, run):
    _, doc = traces[run]
    names = _names(doc)
    ph = [e for e in _slices(doc) if e["cat"] == "phase"]
    want = phases.of_run(store, run).phases
    assert [(e["name"], _ns(e["ts"])) for e in ph] == [(p.name, p.start_ns) for p in want] and want
    idle = [e for e in _slices(doc) if e["cat"] == "idle"]
    assert idle and all(names[e["pid"], e["tid"]].endswith(" idle") and _ns(e["dur"]) > 0 for e in idle)
    assert {e["name"] for e in idle} <= {"idle: waiting for the launch", "idle: launched, not started", "idle"}


def test_nvtx_ranges_on_their_threads(store, traces):
    _, doc = traces["ddp-2gpu"]
    names = _names(doc)
    want = store.query("SELECT kind, tid, start_ns, end_ns, text FROM nvtx_range WHERE run = 'ddp-2gpu' "
                       "AND end_ns IS NOT NULL")
    got = [e for e in _slices(doc) if e["cat"] == "nvtx"]
    assert len(got) == len(want) > 100
    assert Counter((e["args"]["kind"], _ns(e["ts"]), _ns(e["dur"]), e["name"]) for e in got) == Counter(
        (r["kind"], r["start_ns"], r["end_ns"] - r["start_ns"], r["text"]) for r in want)
    for e in got:
        if e["args"]["kind"] == "push_pop":
            assert names[e["pid"], e["tid"]].startswith("thread ")


def test_cli_writes_the_file(store, tmp_path):
    out = tmp_path / "t.json"
    r = subprocess.run([sys.executable, "-m", "profkit", "export-perfetto", str(out), "--db", str(store.path),
                        "--run", "hf-llama-decode"], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert "3,369 launches" in r.stdout and json.loads(out.read_text())["traceEvents"]
    r = subprocess.run([sys.executable, "-m", "profkit", "export-perfetto", str(out), "--db", str(store.path),
                        "--run", "nope"], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 5 and r.stderr.count("\n") == 1


def test_trace_processor_reads_it(traces):
    """Perfetto's own reader, where its binary is at hand (the `perfetto` package fetches it from
    the network on first use, so it is no test dependency): every slice imported."""
    binary = os.environ.get("TRACE_PROCESSOR_BIN") or shutil.which("trace_processor_shell")
    if not binary:
        pytest.skip("no trace_processor_shell binary (set TRACE_PROCESSOR_BIN)")
    from perfetto.trace_processor import TraceProcessor, TraceProcessorConfig

    path, doc = traces["hf-llama-decode"]
    with TraceProcessor(trace=str(path), config=TraceProcessorConfig(bin_path=binary)) as tp:
        n = next(iter(tp.query("SELECT count(*) AS n FROM slice"))).n
    assert n == len(_slices(doc))
