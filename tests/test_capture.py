"""Argument building, tool discovery and error paths of profkit capture, without a GPU."""
import os
import stat
import sys

import pytest
from click.testing import CliRunner
from profdata import DATA

from profkit.capture import session as cap
from profkit.capture.options import CaptureOptions, Hooks
from profkit.cli import cli
from profkit.core.errors import ToolFailed, ToolMissing


def fake_tool(tmp_path, name, script):
    p = tmp_path / name
    p.write_text("#!/bin/sh\n" + script)
    p.chmod(p.stat().st_mode | stat.S_IEXEC)
    return str(p)


def test_nvtx_filters_match_nested_lab_ranges():
    assert cap.nvtx_filters("rmsnorm", ["eager", "triton"], ["llama8b-t4096"]) == \
        ["rmsnorm/eager/llama8b-t4096/", "rmsnorm/triton/llama8b-t4096/"]
    assert cap.nvtx_filters("rmsnorm") == ["rmsnorm/"]
    assert cap.nvtx_filters(None, include=["a/"]) == ["a/"]


def test_ncu_and_nsys_argument_lists(tmp_path):
    cmd = cap.workload_command("rmsnorm", ["triton"], ["llama8b-t4096"], python="python3")
    assert cmd == ["python3", "-m", "profkit.kernels.run", "rmsnorm", "--variant", "triton", "--shape", "llama8b-t4096"]
    a = cap.ncu_args("ncu", tmp_path / "r", cmd, "lean", ["rmsnorm/triton/"])
    assert a[:3] == ["ncu", "--clock-control", "none"] and "--nvtx" in a and "rmsnorm/triton/" in a
    assert "gpu__time_duration.sum" in a[a.index("--metrics") + 1] and a[-len(cmd):] == cmd
    assert "--set" in cap.ncu_args("ncu", tmp_path / "r", cmd, "full")
    assert "--import-source" not in a and "SourceCounters" not in a
    s = cap.ncu_args("ncu", tmp_path / "r", cmd, "lean", source=True)
    assert s[s.index("--import-source") + 1] == "yes" and s[s.index("SourceCounters") - 1] == "--section"
    assert s[-len(cmd):] == cmd and "--metrics" in s  # the counters the labels need stay
    n = cap.nsys_args("nsys", tmp_path / "r", cmd)
    assert n[:4] == ["nsys", "profile", "-t", "cuda,nvtx"] and "--sample=none" in n and n[-len(cmd):] == cmd


def test_tool_discovery(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("NCU", raising=False)
    with pytest.raises(ToolMissing, match="ncu is not installed"):
        cap.find_tool("ncu")
    exe = fake_tool(tmp_path, "ncu", "exit 0\n")
    assert cap.find_tool("ncu") == exe
    monkeypatch.setenv("NCU", exe)
    assert cap.find_tool("ncu") == exe
    with pytest.raises(ToolMissing, match="not an executable"):
        cap.find_tool("ncu", str(tmp_path / "nope"))


@pytest.mark.parametrize("output,code,words", [
    ("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission\n", 1, "ERR_NVGPUCTRPERM"),
    ("Traceback\nValueError: boom\n==ERROR== The application returned an error code (1).\n", 1, "the program failed under ncu (exit 1)"),
    ("==WARNING== No kernels were profiled.\n", 0, "no kernel matched the NVTX filter"),
])
def test_profiler_errors_are_one_line(tmp_path, output, code, words, monkeypatch):
    ncu = fake_tool(tmp_path, "ncu", f"cat <<'X'\n{output}X\nexit {code}\n")
    r = CliRunner().invoke(cli, ["capture", "--db", str(tmp_path / "d.db"), "--out", str(tmp_path), "--no-nsys",
                                 "--ncu-path", ncu, "rmsnorm"])
    assert r.exit_code == ToolFailed.exit_code
    lines = r.output.strip().splitlines()
    assert words in lines[-1] and "Traceback (most recent" not in r.output
    assert not os.path.exists(tmp_path / "d.db")


def test_expected_launches_counts_the_filtered_kernels_on_a_real_timeline():
    """The progress bar's total: launches under the NVTX filters, counted on the nsys capture."""
    from profdata import DATA
    from profkit.parsers import cupti_trace, nsys_sqlite

    from profkit.capture.session import expected_launches

    t = nsys_sqlite.parse(DATA / "rmsnorm-cupti" / "rmsnorm-nsys.nsys.sqlite")
    assert expected_launches(t, ["rmsnorm/eager/llama8b-t4096/"]) == 24
    assert expected_launches(t, ["rmsnorm/"]) == 27
    assert expected_launches(t, ["rmsnorm/triton/", "rmsnorm/eager/"]) == 27
    assert expected_launches(t, []) == 49
    assert expected_launches(t, ["regex:rms.*/"]) is None
    c = cupti_trace.parse(DATA / "rmsnorm-cupti" / "rmsnorm-cupti.cupti.jsonl")
    assert expected_launches(c, ["rmsnorm/triton/"]) == 3


def test_ingest_reuses_a_report_capture_already_parsed(tmp_path, monkeypatch):
    from profdata import DATA
    from profkit.parsers import nsys_sqlite

    from profkit.store.ingest import ingest

    f = DATA / "rmsnorm-cupti" / "rmsnorm-nsys.nsys.sqlite"
    rep = nsys_sqlite.parse(f)
    monkeypatch.setattr(nsys_sqlite, "parse", lambda p: (_ for _ in ()).throw(AssertionError("parsed twice")))
    got = ingest(str(tmp_path / "x.db"), [f], run="r", parsed_reports={f: rep})
    assert got[0].kernels == 49


# ---- one clear line for every way a capture can go wrong (issue 16 item 5, issue 17 item 8) ----
def _invoke(tmp_path, *args):
    return CliRunner().invoke(cli, ["capture", "--db", str(tmp_path / "d.db"), "--out", str(tmp_path / "out"), *args])


def _one_line(r, code, words):
    assert r.exit_code == code, r.output
    assert "Traceback" not in r.output and not (r.exception and not isinstance(r.exception, SystemExit))
    assert words in r.output.strip().splitlines()[-1]


def test_no_nsys_and_no_ncu_is_refused(tmp_path):
    """Was a TypeError traceback."""
    r = _invoke(tmp_path, "--no-nsys", "--no-ncu", "--", "true", "x")
    _one_line(r, 2, "--no-nsys with --no-ncu records nothing")
    assert not (tmp_path / "d.db").exists() and not (tmp_path / "out").exists()


@pytest.mark.parametrize("run", ["../../esc", "ABS", "..", "a/b", "-x"])
def test_a_run_name_never_leaves_out(tmp_path, run):
    """Was: --run ../../esc or --run /abs wrote the reports outside --out."""
    from fake_tools import fake

    run = str(tmp_path / "abs") if run == "ABS" else run
    deep = tmp_path / "a" / "b"
    r = CliRunner().invoke(cli, ["capture", "--db", str(tmp_path / "d.db"), "--out", str(deep / "out"), "--run", run,
                                 "--no-ncu", "--nsys-path", fake(tmp_path, "nsys"), "--", sys.executable, "-c", "pass"])
    _one_line(r, 2, "use a plain name")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["nsys"]  # nothing written anywhere


@pytest.fixture
def core_install(monkeypatch):
    """An install without the `kernels` extra: importing triton fails."""
    import profkit.kernels as lab

    monkeypatch.setattr(lab, "_REGISTRY", {})
    monkeypatch.setitem(sys.modules, "triton", None)
    for name in [m for m in sys.modules if m.startswith("profkit.kernels.")]:
        monkeypatch.delitem(sys.modules, name)


def test_a_command_on_a_core_install_needs_no_kernel_lab(tmp_path, core_install):
    """Was: capture -- true ended in ModuleNotFoundError: triton."""
    from fake_tools import fake

    nsys = fake(tmp_path, "nsys", nsys_sqlite=DATA / "field-h100" / "no_gpu.nsys.sqlite")
    r = _invoke(tmp_path, "--no-ncu", "--nsys-path", nsys, "--", "true")
    _one_line(r, 4, "the program launched no GPU kernel: nothing to profile")


def test_a_workload_on_a_core_install_says_what_to_install(tmp_path, core_install):
    r = _invoke(tmp_path, "rmsnorm")
    _one_line(r, 3, "pip install 'profkit[kernels]'")
    assert "workload 'rmsnorm' needs the kernel lab" in r.output


def test_a_misspelt_workload_lists_close_names(tmp_path):
    _one_line(_invoke(tmp_path, "rmsnrom"), 2, "did you mean rmsnorm")


@pytest.mark.parametrize("cmd,words", [
    (["python3"], "python3 alone would wait for input"),
    (["SCRIPT"], "is a Python script: name its interpreter"),
    (["no-such-program-xyz", "--flag"], "no-such-program-xyz: no such program"),
])
def test_a_command_that_cannot_run_is_refused_before_profiling(tmp_path, cmd, words):
    script = tmp_path / "train.py"
    script.write_text("print('hi')\n")
    cmd = [str(script) if c == "SCRIPT" else c for c in cmd]
    _one_line(_invoke(tmp_path, "--", *cmd), 2, words)


def test_no_gpu_is_one_line(tmp_path, monkeypatch):
    from profkit.capture import session as c

    monkeypatch.undo()  # the real check, with a stand-in nvidia-smi that sees no GPU
    fake_tool(tmp_path, "nvidia-smi", "echo 'NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver.'\nexit 9\n")
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    assert "could not communicate" in c.gpu_problem()
    _one_line(_invoke(tmp_path, "--", "true"), 3, "capture needs an NVIDIA GPU")
    fake_tool(tmp_path, "nvidia-smi", "echo 'GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-x)'\n")
    assert c.gpu_problem() is None


def test_default_run_names_come_from_the_program():
    assert cap.default_run_name(["python3", "-u", "benchmarks/programs/resnet_train.py", "--steps", "5"]) == "resnet_train"
    assert cap.default_run_name(["python3", "-m", "pkg.train"]) == "train"
    assert cap.default_run_name(["./vector add"]) == "vector_add"
    assert cap.default_run_name(["/usr/bin/python3", "-c", "x"]) == "python3"


def test_a_lab_capture_tunes_in_a_plain_run_and_hands_the_picks_over(tmp_path, monkeypatch):
    """The tuning run is the workload without a profiler (no ncu/nsys in its argument list), and
    the profiled command gets its picks with --tuned-in; the picks land in the run meta."""
    seen = []

    def plain_run(args, progress=None, env=None):
        seen.append(args)
        out = args[args.index("--tuned-out") + 1]
        with open(out, "w") as f:
            f.write('{"(\'rmsnorm_rope\', 4096)": "(8, 1)"}')
        return 0, ""

    monkeypatch.setattr(cap, "_run", plain_run)
    got = cap.Captured("r", tmp_path)
    cmd = cap.workload_command("rmsnorm_rope", ["triton"], ["qwen3-8b-t4096"])
    new = cap._tune_first(got, cmd, CaptureOptions(run="r", workload="rmsnorm_rope", variants=("triton",),
                                                      shapes=("qwen3-8b-t4096",)), Hooks())
    (plain,) = seen
    assert plain[1:3] == ["-m", "profkit.kernels.run"] and "--iters" in plain
    assert new[:len(cmd)] == cmd and new[-2] == "--tuned-in" and new[-1] == str(got.tuned_file)
    assert got.meta["tuned"] == {"('rmsnorm_rope', 4096)": "(8, 1)"}


def test_a_failed_tuning_run_leaves_the_profiled_command_as_it_was(tmp_path, monkeypatch):
    notes = []
    monkeypatch.setattr(cap, "_run", lambda args, progress=None, env=None: (1, "Traceback\nRuntimeError: boom"))
    got = cap.Captured("r", tmp_path)
    cmd = cap.workload_command("rmsnorm", [], [])
    assert cap._tune_first(got, cmd, CaptureOptions(run="r", workload="rmsnorm"), Hooks(note=notes.append)) == cmd
    assert "tuned" not in got.meta and got.tuned_file is None
    assert len(notes) == 1 and "exit 1" in notes[0] and "boom" in notes[0]


def test_a_workload_that_is_its_own_program_gets_no_tuning_run(tmp_path, monkeypatch):
    from profkit.kernels import get

    own = "known"  # kernels/known.py: the known-answer program, a main of its own
    assert get(own).main is not None
    monkeypatch.setattr(cap, "_run", lambda *a, **k: pytest.fail("a tuning run"))
    got = cap.Captured("r", tmp_path)
    cmd = cap.workload_command(own)
    assert cap._tune_first(got, cmd, CaptureOptions(run="r", workload=own), Hooks()) == cmd and "tuned" not in got.meta


# ---- --calls: the lab's calls a variant, for a bootstrap band in compare (round 22) ----
def test_calls_reach_the_lab_runner(tmp_path):
    """--calls N becomes the runner's --iters N in the profiled run (the tuning run before it keeps
    one call); the fake ncu logs the command it was given."""
    import json

    from fake_tools import fake

    assert cap.workload_command("rmsnorm", ["triton"], iters=12)[-2:] == ["--iters", "12"]
    assert "--iters" not in cap.workload_command("rmsnorm", ["triton"])
    ncu = fake(tmp_path, "ncu")
    CliRunner().invoke(cli, ["capture", "--db", str(tmp_path / "d.db"), "--out", str(tmp_path / "out"), "--no-nsys",
                             "--ncu-path", ncu, "--calls", "12", "rmsnorm", "--variant", "eager"])
    (argv,) = [json.loads(line)["argv"] for line in (tmp_path / "log.jsonl").read_text().splitlines()
               if json.loads(line)["tool"] == "ncu" and "--version" not in json.loads(line)["argv"]]
    run = argv[argv.index("profkit.kernels.run") - 1:]
    assert run[run.index("--iters") + 1] == "12" and run.count("--iters") == 1


@pytest.mark.parametrize("args,words", [
    (["--calls", "5", "--", "true", "x"], "--calls is for lab workloads"),
    (["--calls", "5", "known"], "is a program of its own"),
    (["--calls", "5", "--ranks", "--", "torchrun", "t.py"], "--calls is for lab workloads"),
])
def test_calls_refused_where_they_would_be_ignored(tmp_path, args, words):
    """A command runs its kernels as often as it calls them, and the `known` workload is a program
    of its own: --calls there would be dropped silently, so it is refused in one line."""
    r = _invoke(tmp_path, "--no-nsys", *args)
    _one_line(r, 2, words)
    assert not (tmp_path / "d.db").exists()


# ---- --rotate / --l2-fill: the context a small kernel meets (round 26) ----
def test_rotate_and_l2_fill_reach_the_lab_runner(tmp_path):
    """--rotate N and --l2-fill become the runner's options in the profiled run; the fake ncu logs
    the command it was given."""
    import json

    from fake_tools import fake

    assert cap.workload_command("swiglu", ["triton"], rotate=8, l2_fill=True)[-3:] == ["--rotate", "8", "--l2-fill"]
    assert "--rotate" not in cap.workload_command("swiglu") and "--l2-fill" not in cap.workload_command("swiglu")
    ncu = fake(tmp_path, "ncu")
    CliRunner().invoke(cli, ["capture", "--db", str(tmp_path / "d.db"), "--out", str(tmp_path / "out"), "--no-nsys",
                             "--ncu-path", ncu, "--rotate", "8", "--l2-fill", "swiglu", "--variant", "eager"])
    (argv,) = [json.loads(line)["argv"] for line in (tmp_path / "log.jsonl").read_text().splitlines()
               if json.loads(line)["tool"] == "ncu" and "--version" not in json.loads(line)["argv"]]
    run = argv[argv.index("profkit.kernels.run") - 1:]
    assert run[run.index("--rotate") + 1] == "8" and run.count("--l2-fill") == 1


@pytest.mark.parametrize("args,words", [
    (["--rotate", "4", "--", "true", "x"], "--rotate is for lab workloads"),
    (["--l2-fill", "--", "true", "x"], "--l2-fill is for lab workloads"),
    (["--l2-fill", "known"], "is a program of its own"),
    (["--rotate", "4", "--l2-fill", "--ranks", "--", "torchrun", "t.py"], "--rotate and --l2-fill are for lab"),
    (["--rotate", "0", "swiglu"], "0 is not in the range"),
])
def test_rotate_and_l2_fill_refused_where_they_would_be_ignored(tmp_path, args, words):
    r = _invoke(tmp_path, "--no-nsys", *args)
    _one_line(r, 2, words)
    assert not (tmp_path / "d.db").exists()
