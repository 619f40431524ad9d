"""The CLI's layout: one module a command, found by the group; capture's options built once."""
import dataclasses
import importlib
import pkgutil
import subprocess
import sys

import click
import pytest
from click.testing import CliRunner

import profkit.cli as package
from profkit.capture.options import CaptureOptions, Sampling
from profkit.cli import cli

HELPERS = {"plumbing"}  # modules of the package that define no command


def test_every_module_of_the_cli_brings_its_commands_to_the_group():
    seen = set()
    for m in pkgutil.iter_modules(package.__path__):
        if m.name.startswith("_") or m.name in HELPERS:
            continue
        module = importlib.import_module(f"profkit.cli.{m.name}")
        own = [o for o in vars(module).values()
               if isinstance(o, click.Command) and o.callback.__module__ == module.__name__]
        assert own, f"profkit/cli/{m.name}.py defines no command"
        for c in own:
            assert cli.commands[c.name] is c
            seen.add(c.name)
    assert seen == set(cli.commands)


def test_the_cli_runs_as_a_module():
    r = subprocess.run([sys.executable, "-m", "profkit.cli", "--version"], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.startswith("profkit, version"), r.stderr


def test_capture_options_are_frozen_and_hold_tuples():
    o = CaptureOptions(run="r", command=["python3", "x.py"], variants=["a"], include=["n/"], ncu_ranks=[1, 0])
    assert (o.command, o.variants, o.include, o.ncu_ranks) == (("python3", "x.py"), ("a",), ("n/",), (1, 0))
    with pytest.raises(dataclasses.FrozenInstanceError):
        o.run = "s"  # type: ignore[misc]


def test_the_capture_command_hands_every_flag_to_one_options_object(tmp_path, monkeypatch):
    from profkit.capture import session

    got = {}

    def fake_capture(opts, hooks=None):
        got["opts"] = opts
        return session.Captured(opts.run, tmp_path / opts.run)

    monkeypatch.setattr(session, "capture", fake_capture)
    r = CliRunner().invoke(cli, ["capture", "--db", str(tmp_path / "t.db"), "--out", str(tmp_path), "--no-nsys",
                                 "--metrics", "roofline", "--samples", "3", "--warmup", "2", "--max-kernels", "9",
                                 "--kernel-name-base", "function", "--range", "step", "--no-profiler-api",
                                 "--nvtx-include", "a/", "--nvtx-include", "b/", "--clock-control", "base",
                                 "--ncu-path", "/x/ncu", "--tracer", "cupti", "--", "true", "--flag"])
    assert r.exit_code == 0, r.output
    assert got["opts"] == CaptureOptions(
        run="true", out=tmp_path, command=("true", "--flag"), use_nsys=False, metrics="roofline",
        include=("a/", "b/"), tracer="cupti", clock_control="base", ncu="/x/ncu",
        sample=Sampling(samples=3, warmup=2, max_kernels=9, key="function"), range_name="step", profiler_api=False)
