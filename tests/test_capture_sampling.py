"""Sampled captures of ordinary programs, on a real pair of reports: the H100 timeline of the
field workload (tests/data/field-h100/ws.nsys.sqlite, 52 launches) and ncu's
`--filter-mode per-launch-config --launch-count 1` report of the same program
(ws_perconfig.ncu-rep.xz, 12 launches). The sampling rule in profkit.core.sampling must pick on the
timeline exactly the launches ncu picked; the store links them and every other launch of a
measured kernel and configuration points at its measured one (sampled_from); classify labels
those from the measured counters and says so. The whole `profkit capture -- COMMAND` runs with
stand-in nsys and ncu that write these real reports."""
import json
import sys

import pytest
from click.testing import CliRunner
from fake_tools import PERCONFIG, WS, fake
from profdata import DATA
from profkit.parsers import ncu_rep, nsys_sqlite

from profkit.capture.session import find_step, torch_ranges_command
from profkit.cli import cli
from profkit.core import sampling
from profkit.core.errors import BadArgument
from profkit.core.rows import KERNEL_FIELDS
from profkit.store.store import Store

AT = [KERNEL_FIELDS.index(f) for f in sampling.FIELDS]


def rows(report):
    return [tuple(k[i] for i in AT) for k in report.kernels]


@pytest.fixture(scope="module")
def timeline():
    return rows(nsys_sqlite.parse(WS))


@pytest.fixture(scope="module")
def profiled():
    return rows(ncu_rep.parse(PERCONFIG))


def test_the_sampling_rule_picks_what_ncu_picked(timeline, profiled):
    picked = sampling.select(timeline, sampling.Spec())
    assert len(timeline) == 52 and len(picked) == len(profiled) == 12
    assert [timeline[i][0] for i in picked] == [p[0] for p in profiled]  # full names, in ncu's order
    assert [sampling.config(timeline[i]) for i in picked] == [sampling.config(p) for p in profiled]
    # ncu told configurations apart by function name: two more template instances share one
    assert len({sampling.fine_key(r) for r in timeline}) == 14
    assert len(sampling.select(timeline, sampling.Spec(key="mangled"))) == 14


def test_profiled_launches_pair_with_the_launches_they_measured(timeline, profiled):
    got = sampling.pairs(timeline, profiled, sampling.Spec())
    assert len(got) == 12 and len({t for _, t in got}) == 12
    assert all(timeline[t][0] == profiled[p][0] and sampling.config(timeline[t]) == sampling.config(profiled[p])
               for p, t in got)
    # the 3rd launch of the program is the second config of the same copy kernel: order alone would miss it
    assert sorted(t for _, t in got) == [0, 1, 4, 5, 6, 7, 9, 11, 12, 13, 14, 15]


def test_every_other_launch_of_a_measured_kernel_points_at_it(timeline, profiled):
    measured = {t for _, t in sampling.pairs(timeline, profiled, sampling.Spec())}
    sib = sampling.siblings(timeline, measured)
    assert len(sib) == 32  # 52 - 12 measured - 8 launches of 2 kernels ncu never measured (same function name)
    assert all(sampling.fine_key(timeline[i]) == sampling.fine_key(timeline[m]) and m in measured
               for i, m in sib.items())
    unmeasured = {timeline[i][0].split("<", 2)[1][:40] for i in range(52) if i not in measured and i not in sib}
    assert any("rsqrt" in n for n in unmeasured) and any("bfloat16_copy" in n for n in unmeasured)


def test_windows_warmup_and_the_cap(timeline):
    norm = sampling.select(timeline, sampling.Spec(ranges=["norm"]))
    assert norm and all(sampling.under_range(timeline[i][9], "norm") for i in norm)
    assert len(norm) == len({sampling.config(timeline[i]) for i in range(52) if sampling.under_range(timeline[i][9], "norm")})
    t0 = sorted(r[10] for r in timeline)[20]
    late = sampling.select(timeline, sampling.Spec(time=[[t0, 2 ** 62]]))
    assert all(timeline[i][10] >= t0 for i in late)
    p = sampling.plan(timeline, sampling.Spec(skip=1))
    assert p.profiled == 11 and sum(p.left_out.values()) == 3  # configurations launched once: no counters
    capped = sampling.plan(timeline, sampling.Spec(), max_kernels=5)
    assert capped.profiled <= 5 and capped.spec.names and "left out by --max-kernels 5" in capped.describe("lean")
    args = sampling.ncu_filter_args(capped.spec)
    assert args[:4] == ["--filter-mode", "per-launch-config", "--launch-count", "1"]
    assert args[args.index("--kernel-name") + 1].startswith("regex:^(")
    assert sampling.ncu_filter_args(sampling.Spec(time=[[0, 1]], skip=2))[-4:] == ["--launch-skip", "2",
                                                                                  "--profile-from-start", "off"]
    mangled = sampling.name_filter(["vectorized_elementwise_kernel", "_add"], "mangled")
    assert mangled == "regex:^(vectorized_elementwise_kernel|_add)$|(^|[^0-9])(29vectorized_elementwise_kernel|4_add)"
    import re
    rx = re.compile(mangled.removeprefix("regex:"))
    assert rx.search("_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEE") and rx.search("_add")
    assert not rx.search("_ZN2at6native129vectorized_elementwise_kernelE") and rx.search("_Z4_addxPf")
    assert sampling.under_range("a/b c/d", "b c") and not sampling.under_range("a/bc/d", "b") \
        and sampling.under_range("x//layer1/Conv + /relu/Relu/y", "/layer1/Conv + /relu/Relu")


def calls(tmp_path):
    return [json.loads(l) for l in (tmp_path / "log.jsonl").read_text().splitlines() if '"--version"' not in l]


def capture(tmp_path, *args, nsys=None, ncu=None, program=("-c", "print('the program ran')")):
    # the stand-in ncu writes the report ncu made keying configurations by function name
    return CliRunner().invoke(cli, ["capture", "--db", str(tmp_path / "d.db"), "--out", str(tmp_path / "p"),
                                    "--kernel-name-base", "function",
                                    "--nsys-path", nsys or fake(tmp_path, "nsys"), "--ncu-path", ncu or fake(tmp_path, "ncu"),
                                    *args, "--", sys.executable, *program])


def test_a_command_capture_samples_each_configuration_and_labels_every_launch(tmp_path):
    r = capture(tmp_path, "--run", "ws")
    assert r.exit_code == 0, r.output
    assert "timeline: 52 launches of 7 kernels; ncu will profile 12 (1 per kernel and launch configuration)" in r.output
    ncu = next(c["argv"] for c in calls(tmp_path) if c["tool"] == "ncu")
    assert "--nvtx" in ncu and ncu[ncu.index("--filter-mode") + 1] == "per-launch-config"
    assert ncu[ncu.index("--launch-count") + 1] == "1"
    assert "ws: 52 timeline launches: 12 measured by ncu, 32 labelled from a measured launch" in r.output
    with Store(tmp_path / "d.db") as s:
        assert s.query("SELECT count(*) n FROM launch WHERE source = 'ncu' AND timeline_id IS NULL") == [{"n": 0}]
        assert s.query("SELECT count(sampled_from) n FROM kernels WHERE run = 'ws'") == [{"n": 32}]
        # a sibling's sampled_from is a measured launch of the same kernel and configuration
        bad = s.query("""SELECT count(*) n FROM kernels k JOIN kernels m ON m.kernel_id = k.sampled_from
                         WHERE k.kernel_name != m.kernel_name OR k.grid_x != m.grid_x OR k.block_x != m.block_x
                            OR NOT EXISTS (SELECT 1 FROM launch n WHERE n.timeline_id = m.kernel_id)""")
        assert bad == [{"n": 0}]
        meta = json.loads(s.query("SELECT meta FROM runs WHERE run = 'ws'")[0]["meta"])
        assert meta["sampling"]["ncu_filter"] == {"per_config": True, "samples": 1, "skip": 0, "key": "function"}
        assert meta["sampling"]["plan"]["profiled"] == 12
    r = CliRunner().invoke(cli, ["classify", "--db", str(tmp_path / "d.db"), "--run", "ws", "--json"])
    labels = json.loads(r.output)
    sampled = [x for x in labels if "sampled_from" in json.loads(x["evidence"])]
    assert len(labels) == 52 and len(sampled) == 32
    assert all("the sampled launch of this kernel and configuration" in x["reason"] for x in sampled)
    assert {x["sampled_from"] for x in sampled} == {json.loads(x["evidence"])["sampled_from"] for x in sampled}


def test_a_capture_folder_loads_again_with_its_sampling(tmp_path):
    """profkit analyse of the capture folder (capture.json holds how ncu sampled) links as capture did."""
    from profkit.store.profiles import load_profiles

    assert capture(tmp_path, "--run", "ws").exit_code == 0
    load_profiles(tmp_path / "p", str(tmp_path / "again.db"))
    with Store(tmp_path / "again.db") as s:
        assert s.query("SELECT count(sampled_from) n FROM kernels WHERE run = 'ws'") == [{"n": 32}]
        assert s.query("SELECT count(*) n FROM launch WHERE source = 'ncu' AND timeline_id IS NOT NULL") == [{"n": 12}]


def test_all_launches_and_window_options_reach_ncu(tmp_path):
    r = capture(tmp_path, "--run", "a", "--all-launches", "--range", "norm")
    assert "ncu will profile 24 (every launch in norm" in r.output, r.output  # 3 steps x 8 launches under norm
    ncu = next(c["argv"] for c in calls(tmp_path) if c["tool"] == "ncu")
    assert "--filter-mode" not in ncu and ncu[ncu.index("--nvtx-include") + 1] == "norm/"
    r = capture(tmp_path, "--run", "b", "--range", "nrom")
    assert r.exit_code == 2 and "no such NVTX range in the program; close names: norm" in r.output
    r = capture(tmp_path, "--run", "c", "--step", "3")
    assert r.exit_code == 2 and "--step 3: no such step; the program marks steps 0 to 2" in r.output
    r = capture(tmp_path, "--run", "d", "--step", "1")
    # the step by launch index (every thread's launches, as ncu counts them): its 12 launches,
    # after the 28 of the random init and step 0
    assert "step 1: launches 28 to 39 of the process (12 of the step)" in r.output, r.output
    assert "ncu will profile 12 (every launch from launch 28 of the process on" in r.output, r.output
    ncu = [c["argv"] for c in calls(tmp_path) if c["tool"] == "ncu"][-1]
    assert ncu[ncu.index("--launch-skip-before-match") + 1] == "28" and ncu[ncu.index("--launch-count") + 1] == "12"
    assert "--nvtx-include" not in ncu and "--filter-mode" not in ncu
    with pytest.raises(BadArgument, match="the program marks no steps"):
        find_step(["norm", "matmul"], 3)
    assert find_step(["ProfilerStep#7", "x"], 7) == "ProfilerStep#7" and find_step(["iteration_2"], 2) == "iteration_2"


def test_a_report_that_fails_to_load_leaves_the_others_loaded(tmp_path):
    ncu = fake(tmp_path, "ncu", ncu_write="open(out + '.ncu-rep', 'wb').write(b'NVR\\x00 not a report')")
    r = capture(tmp_path, "--run", "ws", ncu=ncu)
    assert r.exit_code == 4 and "Traceback" not in r.output
    last = r.output.strip().splitlines()[-1]
    assert "ws.ncu-rep: not loaded:" in last and "loaded as run ws" in last
    assert (tmp_path / "p" / "ws" / "ws.ncu-rep").exists()  # the raw report stays
    with Store(tmp_path / "d.db") as s:
        assert s.query("SELECT count(*) n FROM kernels WHERE run = 'ws'") == [{"n": 52}]


def test_a_program_that_fails_keeps_its_timeline_and_says_its_exit_code(tmp_path):
    r = capture(tmp_path, "--run", "bad", program=("-c", "import sys; print('boom'); sys.exit(3)"))
    assert r.exit_code == 4, r.output
    assert "the program failed (exit 3) under the nsys tracer" in r.output and "loaded as run bad" in r.output
    assert [c["tool"] for c in calls(tmp_path)] == ["nsys", "nsys"]  # profile, export; no ncu
    with Store(tmp_path / "d.db") as s:
        assert s.query("SELECT count(*) n FROM kernels WHERE run = 'bad'") == [{"n": 52}]
        assert json.loads(s.query("SELECT meta FROM runs")[0]["meta"])["program_exit"] == 3


def test_missing_counter_permission_keeps_the_timeline(tmp_path):
    ncu = fake(tmp_path, "ncu", profiled=0,
               ncu_write="print('==ERROR== ERR_NVGPUCTRPERM - The user does not have permission'); sys.exit(1)")
    r = capture(tmp_path, "--run", "perm", ncu=ncu)
    assert r.exit_code == 4 and "ERR_NVGPUCTRPERM" in r.output.strip().splitlines()[-1]
    assert "NVreg_RestrictProfilingToAdminUsers=0" in r.output and "loaded as run perm" in r.output


def test_a_program_without_kernels_says_there_was_nothing_to_profile(tmp_path):
    nsys = fake(tmp_path, "nsys", nsys_sqlite=DATA / "field-h100" / "no_gpu.nsys.sqlite")
    r = capture(tmp_path, "--run", "cpu", nsys=nsys)
    assert r.exit_code == 4
    assert "the program launched no GPU kernel: nothing to profile; nothing loaded" in r.output
    assert [c["tool"] for c in calls(tmp_path)] == ["nsys", "nsys"]


def test_max_kernels_caps_what_ncu_profiles(tmp_path):
    r = capture(tmp_path, "--run", "cap", "--max-kernels", "5")
    assert "ncu will profile 5 (1 per kernel and launch configuration; 5 kernels left out by --max-kernels 5" in r.output
    ncu = next(c["argv"] for c in calls(tmp_path) if c["tool"] == "ncu")
    assert ncu[ncu.index("--kernel-name") + 1] == "regex:^(elementwise_kernel|vectorized_elementwise_kernel)$"


def test_range_filters_for_ncu():
    from profkit.capture.session import ncu_range_filters

    known = {"norm": (None, "push_pop"), "epoch": (None, "start_end"), "fwd": ("mydomain", "push_pop")}
    assert ncu_range_filters("norm", known) == ["norm/"]
    assert ncu_range_filters("epoch", known) == ["epoch"]
    assert ncu_range_filters("fwd", known) == ["mydomain@fwd/"]
    assert ncu_range_filters("unseen", {}) == ["unseen/", "unseen"]  # no timeline: either kind
    # a record_function range under --torch-ranges: PyTorch appends per-call ids to its name
    assert ncu_range_filters("train step", {}, torch_ranges=True) == ["regex:^train\\ step(, .*)?$/"]


def test_torch_range_names_lose_their_per_call_ids():
    from profkit.parsers._ops import clean_torch_name, clean_torch_ranges
    from profkit.core.rows import RANGE_FIELDS, Parsed, kernel_row

    assert clean_torch_name("aten::addmm, seq = 12, op_id = 345, sizes = [[64, 512], [512, 1000]]") == "aten::addmm"
    assert clean_torch_name("step 3/aten::conv2d, op_id = 7/aten::convolution, seq = 3, op_id = 8") == \
        "step 3/aten::conv2d/aten::convolution"
    rep = Parsed("x", "nsys-sqlite", "nsys", [kernel_row(seq=0, kernel_name="k", nvtx_range="aten::mm, seq = 1",
                                                         nvtx_path="train_step, op_id = 2/aten::mm, seq = 1")],
                 [tuple({"text": "aten::mm, seq = 1", "path": "train_step, op_id = 2/aten::mm, seq = 1"}.get(f)
                        for f in RANGE_FIELDS)])
    clean_torch_ranges(rep)
    k = dict(zip(KERNEL_FIELDS, rep.kernels[0]))
    assert (k["nvtx_range"], k["nvtx_path"]) == ("aten::mm", "train_step/aten::mm")
    assert rep.ranges[0][RANGE_FIELDS.index("path")] == "train_step/aten::mm"


def test_the_torch_ranges_launcher_runs_the_program_as_python_would(tmp_path, monkeypatch):
    """emit_nvtx needs a GPU; here a stand-in records that the program ran inside it."""
    import contextlib

    import torch

    from profkit.capture import torch_ranges

    entered = []

    @contextlib.contextmanager
    def emit_nvtx(record_shapes=False):
        entered.append(record_shapes)
        yield

    monkeypatch.setattr(torch.autograd.profiler, "emit_nvtx", emit_nvtx)
    (tmp_path / "helper.py").write_text("VALUE = 41\n")
    prog = tmp_path / "prog.py"
    prog.write_text("import sys, helper\nprint(__name__, sys.argv[1:], helper.VALUE + 1)\nsys.exit(int(sys.argv[1]))\n")
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    assert torch_ranges.main([str(prog), "3"]) == 3
    assert entered == [True]  # the launcher records shapes: the ops table
    assert torch_ranges.main([]) == 2
    cmd = torch_ranges_command(["python3", "-u", "train.py", "--lr", "1"])
    assert cmd == ["python3", "-u", torch_ranges.__file__, "train.py", "--lr", "1"]
    with pytest.raises(BadArgument, match="runs a Python program"):
        torch_ranges_command(["./a.out"])


def test_profiler_windows_from_a_timeline(tmp_path):
    """cudaProfilerStart/Stop calls on an nsys export (the real field export, with the calls added
    the way nsys records runtime calls) become windows on the timeline's clock."""
    import shutil
    import sqlite3

    from profkit.capture.session import profiler_windows

    f = tmp_path / "ws.nsys.sqlite"
    shutil.copy(WS, f)
    assert profiler_windows(f) is None
    c = sqlite3.connect(f)
    t = sorted(r[0] for r in c.execute("SELECT start FROM CUPTI_ACTIVITY_KIND_KERNEL"))
    top = c.execute("SELECT max(id) FROM StringIds").fetchone()[0]
    c.executemany("INSERT INTO StringIds (id, value) VALUES (?, ?)",
                  [(top + 1, "cudaProfilerStart_v4000"), (top + 2, "cudaProfilerStop_v4000")])
    row = c.execute("SELECT * FROM CUPTI_ACTIVITY_KIND_RUNTIME LIMIT 1").fetchone()
    cols = [d[1] for d in c.execute("PRAGMA table_info(CUPTI_ACTIVITY_KIND_RUNTIME)")]
    for start, name in ((t[20], top + 1), (t[40], top + 2)):
        r = dict(zip(cols, row), start=start, end=start + 10, nameId=name, correlationId=10 ** 6 + start % 1000)
        c.execute(f"INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                  [r[k] for k in cols])
    c.commit()
    c.close()
    assert profiler_windows(f) == [[t[20], t[40]]]
    # the plan then counts only launches called inside the window
    rows_ = rows(nsys_sqlite.parse(f))
    inside = sampling.select(rows_, sampling.Spec(time=[[t[20], t[40]]], per_config=False))
    assert inside and all(t[20] <= (r[10] or r[11]) < t[40] for r in (rows_[i] for i in inside))


def test_a_second_capture_into_a_run_is_refused_before_the_program_runs(tmp_path):
    """A run holds one timeline and one counter report: capturing the same run again (the after
    of a before/after pair, under the default name) was refused only when loaded, after the
    program's whole run under both profilers. Now before anything runs, in one line; a run of
    its own, or a report of the role the run lacks, still captures."""
    assert capture(tmp_path, "--run", "ws").exit_code == 0
    n = len(calls(tmp_path))
    r = capture(tmp_path, "--run", "ws", program=("-c", f"open({str(tmp_path / 'ran')!r}, 'w').write('x')"))
    assert r.exit_code == 2, r.output
    last = r.output.strip().splitlines()[-1]
    assert "run 'ws' in" in last and "already holds a counters and a timeline report" in last and "--run ws-2" in last
    assert len(calls(tmp_path)) == n and not (tmp_path / "ran").exists()  # no profiler, no program
    r = capture(tmp_path, "--run", "ws", "--no-ncu")
    assert r.exit_code == 2 and "already holds a timeline report" in r.output.strip().splitlines()[-1]
    # the after capture makes other bytes than the before (the stand-in: the same export, vacuumed)
    import sqlite3

    src = sqlite3.connect(f"file:{WS}?mode=ro", uri=True)
    src.execute(f"VACUUM INTO '{tmp_path / 'after.sqlite'}'")
    src.close()
    after = fake(tmp_path, "nsys", nsys_sqlite=tmp_path / "after.sqlite")
    r = capture(tmp_path, "--run", "ws-2", "--no-ncu", nsys=after)
    assert r.exit_code == 0, r.output
    with Store(tmp_path / "d.db") as s:
        assert s.runs() == ["ws", "ws-2"]


def test_a_capture_adds_the_role_a_run_lacks(tmp_path):
    """A timeline-only capture, then an ncu-only capture of the same run: one run, both roles."""
    assert capture(tmp_path, "--run", "ws", "--no-ncu").exit_code == 0
    r = capture(tmp_path, "--run", "ws", "--no-nsys")
    assert r.exit_code == 0, r.output
    with Store(tmp_path / "d.db") as s:
        assert s.query("SELECT format FROM report_file WHERE run = 'ws' ORDER BY id") == [
            {"format": "nsys-sqlite"}, {"format": "ncu-rep"}]
