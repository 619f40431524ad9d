"""Launches on autograd's worker thread belong to the step the main thread has open
(profkit.store.inherit), on real eager training loops: tests/data/resnet-threads (README there)
and tests/data/kineto-h100 (one workload under nsys and under torch.profiler)."""
import re
import shutil
import sqlite3

import pytest
from profdata import DATA

from profkit.analyses import phases
from profkit.analyses import timeline as tl
from profkit.analyses.advise import advise
from profkit.analyses.selection import Selector, groups
from profkit.store import inherit
from profkit.store.ingest import ingest
from profkit.store.store import Store

RESNET = DATA / "resnet-threads"
RUN = "resnet-threads"
# ResNet-18 batch 32 with SGD, this capture: the forward launches 214 kernels on the main thread,
# the backward and the optimizer 242 on autograd's thread; step 0 two fewer
FORWARD, PER_STEP = 214, 456


@pytest.fixture(scope="module")
def resnet(tmp_path_factory) -> str:
    db = str(tmp_path_factory.mktemp("threads") / "r.db")
    ingest(db, [RESNET / "pair-sync-after-end.nsys.sqlite.xz", RESNET / "capture.json"], run=RUN)
    return db


def test_backward_kernels_land_in_their_step(resnet):
    with Store(resnet) as s:
        per = {r["nvtx_path"]: r["n"] for r in s.query(
            "SELECT nvtx_path, count(*) n FROM kernels WHERE run = ? GROUP BY 1", (RUN,))}
        main = s.query("SELECT DISTINCT tid FROM nvtx_range WHERE run = ?", (RUN,))
        steps = s.query("SELECT text, start_ns, end_ns FROM nvtx_range WHERE run = ?", (RUN,))
        got = s.query("SELECT nvtx_path, tid, nvtx_tid, api_start_ns FROM kernels WHERE run = ? AND nvtx_inherited",
                      (RUN,))
        own = s.query("SELECT count(*) n FROM launch WHERE run = ? AND nvtx_path IS NULL", (RUN,))[0]["n"]
        own_fwd = s.query("SELECT count(*) n FROM kernels WHERE run = ? AND nvtx_path = 'step 5' AND NOT nvtx_inherited",
                          (RUN,))[0]["n"]
    assert len(main) == 1
    lead = main[0]["tid"]
    assert per.pop(None) == 2  # before the first step
    assert per == {f"step {n}": PER_STEP - 2 * (n == 0) for n in range(16)}
    assert own_fwd == FORWARD
    # every inherited launch: another thread, read on the main one, under the step open at its call
    assert len(got) == 16 * (PER_STEP - FORWARD)
    for k in got:
        assert k["tid"] != lead and k["nvtx_tid"] == lead
        (step,) = [r["text"] for r in steps if r["start_ns"] <= k["api_start_ns"] <= r["end_ns"]]
        assert k["nvtx_path"] == step
    # the launching thread's own path stays where ncu linking and capture's sampling read it
    assert own == len(got) + 2


def test_timeline_and_phases_count_the_backward(resnet):
    with Store(resnet) as s:
        rows = {r["path"]: r for r in tl.ranges(s, RUN)}
        ph = phases.of_run(s, RUN)
    assert sorted(rows) == sorted(f"step {n}" for n in range(16))
    assert all(r["kernels"] == PER_STEP for p, r in rows.items() if p != "step 0")
    steps = [p for p in ph.phases if p.kind == "steps"]
    assert len(steps) == 1 and steps[0].launches == steps[0].steps * PER_STEP


def test_advise_one_item_for_the_repeated_steps(resnet):
    with Store(resnet) as s:
        a = advise(s, RUN)
    assert not [n for n in a.notes if "outside any NVTX range" in n]
    assert not [i for i in a.items if i.nvtx_path and re.search(r"step \d", i.nvtx_path)]
    top = a.items[0]
    assert (top.kind, top.nvtx_path, top.label) == ("graph", "step *", "launch_overhead")
    assert (top.calls, top.launches) == (14, 14 * PER_STEP)  # the steady state: steps 2-15


def test_selection_finds_the_step_instance_of_inherited_launches(resnet):
    with Store(resnet) as s:
        g = groups(s, Selector(RUN, None))["step 7"]
    assert len(g.kernels) == PER_STEP and len({k["call"] for k in g.kernels}) == 1
    assert None not in {k["call"] for k in g.kernels}


def test_backfill_gives_what_ingest_gave(resnet, tmp_path):
    db = tmp_path / "b.db"
    shutil.copy(resnet, db)
    with sqlite3.connect(db) as c:
        want = c.execute("SELECT * FROM launch_inherit ORDER BY launch_id").fetchall()
        c.execute("DELETE FROM launch_inherit")
        inherit.backfill(c)
        assert c.execute("SELECT * FROM launch_inherit ORDER BY launch_id").fetchall() == want
    c.close()


def test_kineto_and_nsys_put_the_same_kernels_in_each_step(tmp_path):
    """One workload captured by nsys and by torch.profiler: backward (autograd's thread) and all.
    Under nsys, CUB's own NVTX ranges on autograd's thread follow the step's."""
    db = str(tmp_path / "k.db")
    ingest(db, [DATA / "kineto-h100" / "tf.kineto.json.gz"], run="kineto")
    ingest(db, [DATA / "kineto-h100" / "tf.nsys.sqlite.xz"], run="nsys")
    with Store(db) as s:
        per = {
            run: {r["step"]: r["n"] for r in s.query(
                "SELECT substr(nvtx_path, 1, 6) step, count(*) n FROM kernels WHERE run = ? GROUP BY 1", (run,))}
            for run in ("kineto", "nsys")
        }
        cub = s.query("SELECT count(*) n FROM kernels WHERE run = 'nsys' AND nvtx_inherited "
                      "AND nvtx_path LIKE 'step _/backward/cub::%'")[0]["n"]
    assert per["kineto"] == per["nsys"] == {f"step {n}": 303 for n in range(3)}
    assert cub == 3 * 14


def test_lead_thread_covers_the_most_time(tmp_path):
    # pid, tid, time spanned, ranges: thread 2 pushes many short ranges, thread 1 one long one
    assert inherit.lead_threads([(7, 1, 100, 1), (7, 2, 18, 9), (8, 4, 10, 1), (8, 5, 60, 1)]) == {7: 1, 8: 5}
    # equal time: more ranges, then the smaller thread id (9 < 10 as numbers), in any row order
    tie = [(1, 10, 10, 1), (1, 9, 10, 1), (1, 3, 10, 2)]
    assert inherit.lead_threads(tie) == inherit.lead_threads(tie[::-1]) == {1: 3}
    assert inherit.lead_threads(tie[:2]) == inherit.lead_threads(tie[1::-1]) == {1: 9}
    # spans from the store: the outermost ranges only, an unclosed one up to the last event
    with Store(str(tmp_path / "c.db")) as s:
        c = s.conn
        c.execute("INSERT INTO run (run, created_at) VALUES ('r', '')")
        c.execute("INSERT INTO report_file (run, path, sha256, format, loaded_at, kernels, ranges, counters) "
                  "VALUES ('r', 'f', 'x', 'nsys', '', 0, 4, 0)")
        c.execute("""INSERT INTO nvtx_path (id, names, path, text, depth) VALUES (1, '["a"]', 'a', 'a', 0),
                     (2, '["a","b"]', 'a/b', 'b', 1)""")
        c.executemany(
            "INSERT INTO nvtx_event (run, file_id, kind, start_ns, end_ns, pid, tid, path_id) "
            "VALUES ('r', 1, 'push_pop', ?, ?, 7, ?, ?)",
            [(0, 50, 1, 1), (10, 20, 1, 2), (60, None, 2, 1), (70, 100, 3, 1)],
        )
        got = sorted(inherit._coverage(c, 1))
    assert got == [(7, 1, 50, 2), (7, 2, 40, 1), (7, 3, 30, 1)]


def test_single_thread_lab_profiles_are_unchanged(profiles_db_built):
    """profiles/: lab runs launch from the thread that pushes their ranges, and nothing inherits;
    the DDP runs' backward (autograd's thread, NCCL's own ranges there) lands in its step."""
    c = sqlite3.connect(f"file:{profiles_db_built}?mode=ro", uri=True)
    try:
        per_run = dict(c.execute(
            "SELECT k.run, count(*) FROM kernels k JOIN launch l ON l.id = k.kernel_id "
            "WHERE k.nvtx_path IS NOT l.nvtx_path OR k.nvtx_tid IS NOT l.tid OR k.nvtx_inherited GROUP BY 1"))
        runs = [r for (r,) in c.execute("SELECT run FROM run")]
        ddp = dict(c.execute(
            "SELECT substr(nvtx_path, 1, instr(nvtx_path || '/', '/') - 1), count(*) FROM kernels "
            "WHERE run = 'ddp-2gpu' AND nvtx_inherited GROUP BY 1"))
    finally:
        c.close()
    assert set(per_run) == {"ddp-2gpu", "ddp-2gpu-slow"} and len(runs) > 20
    # ranks 0 and 1: 23 backward launches a step (NCCL's all-reduce in its own range among them),
    # and the warm-up's backward, inside a `backward` range pushed before the steps
    assert ddp == {**{f"step {n}": 2 * 23 for n in range(5)}, "backward": 2 * 66}


def test_a_public_ddp_trace_holds_its_backward_in_each_step(tmp_path):
    """HolisticTraceAnalysis's public torch.profiler trace of a DDP step (tests/data/kineto-hta):
    `## backward ##` is pushed on the main thread, the backward runs on autograd's; advise makes
    the five ProfilerStep#N one item, and the backward is two thirds of its GPU time."""
    db = str(tmp_path / "h.db")
    ingest(db, [DATA / "kineto-hta" / "ns_resolution_trace" / "rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"],
           run="hta")
    with Store(db) as s:
        n = s.query("SELECT count(*) n, sum(nvtx_inherited) i, count(nvtx_path) ranged FROM kernels")[0]
        a = advise(s, "hta")
    assert (n["n"], n["i"], n["ranged"]) == (4350, 2780, 4350)
    assert not [x for x in a.notes if "outside any NVTX range" in x]
    by = {i.nvtx_path: i for i in a.items}
    assert by["ProfilerStep#*"].kind == "graph" and by["ProfilerStep#*"].calls == 5
    back = by["ProfilerStep#*/## backward ##"]
    assert back.calls == 5 and back.launches == 2810 and 0.6 < back.share_gpu < 0.7
