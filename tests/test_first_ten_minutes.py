"""What a newcomer trips over in the CLI output, each fixed on the shipped profiles
(issue "the first ten minutes")."""
import json
import os
import shlex
import subprocess
import sys

import pytest
from click.testing import CliRunner
from profdata import PROFILES

from profkit.cli import cli

RMS = "rmsnorm-eager-vs-triton-h200"


@pytest.fixture(scope="module")
def db(profiles_db):
    return profiles_db


def _run(*args):
    return CliRunner().invoke(cli, list(args))


def test_classify_table_keeps_variants_apart_and_names_unranged_launches(db):
    r = _run("classify", "--db", db, "--run", RMS)
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    eager = [x for x in lines if "rmsnorm/eager/qwen7b-t4096" in x and " dram " in x]
    triton = [x for x in lines if "rmsnorm/triton/qwen7b-t4096" in x and " dram " in x]
    assert len(eager) == 1 and len(triton) == 1  # was one merged 'llama8b-t32768' row of 21 launches
    assert "│       18 │" in eager[0] and "│        3 │" in triton[0]
    assert "(outside any NVTX range)" in r.stdout  # not a blank cell that reads as "same as above"
    assert "--per-launch" in r.stdout
    per = _run("classify", "--db", db, "--run", RMS, "--per-launch")
    assert per.exit_code == 0 and per.stdout.count("│ dram ") >= 21


def test_no_run_given_says_which_run_it_used(db):
    for cmd in ("kernels", "classify", "timeline"):
        r = _run(cmd, "--db", db)
        assert r.exit_code == 0, r.output
        assert "no --run given: using the newest run" in r.stderr and "`profkit runs` lists them" in r.stderr


def test_compare_misspelt_variant_lists_the_variants(db):
    r = _run("compare", "--db", db, f"{RMS}:eager", f"{RMS}:trition")
    assert r.exit_code == 2
    assert (f"no NVTX path of run '{RMS}' has a part 'trition'; did you mean {RMS}:triton? "
            f"variants of this run: eager, triton") in r.stderr
    assert "RUN:VARIANT" in _run("compare", "--help").stdout


def test_zero_flop_kernels_are_not_held_against_a_tensor_ridge(db):
    r = _run("sql", "--db", db, "--json", f"SELECT reason FROM classifications WHERE run = '{RMS}'")
    _run("classify", "--db", db, "--run", RMS)
    reasons = [x["reason"] for x in json.loads(_run("sql", "--db", db, "--json",
                                                    f"SELECT reason FROM classifications WHERE run = '{RMS}'").stdout)]
    assert reasons and not any("0.00 FLOP/B, far below the bf16_tensor ridge" in x for x in reasons), r.stdout
    assert any("no floating-point work counted" in x or "no FLOPs counted" in x for x in reasons)


def test_timeline_shows_warm_up_ranges_apart(db):
    r = _run("timeline", "--db", db, "--run", "e2e-decode")
    assert r.exit_code == 0, r.output
    head, _, rest = r.stdout.partition("ranges outside the workload's e2e/decode/VARIANT/SHAPE ranges")
    assert rest, r.stdout
    assert "│ attn " not in head and "│ attn " in rest  # the warm-up's operator ranges, in their own table
    assert "e2e/decode/eager/llama3-8b-l4-ctx448/step " in head


def test_ranks_columns_say_their_unit(db):
    r = _run("ranks", "--db", db, "--run", "ddp-2gpu-slow")
    assert r.exit_code == 0, r.output
    assert "_ns columns in us" not in r.stdout and "stragglers per step (us)" in r.stdout
    assert "wait_skew_us" in r.stdout and "wait_skew_ns" not in r.stdout


def _main_job(*args):
    """The main job as a user runs it: a process of its own at 100 columns (an xdist worker's
    process holds whatever earlier tests left in it: imported libraries, SQLite's limits)."""
    env = {**os.environ, "COLUMNS": "100", "LINES": "50"}
    return subprocess.run([sys.executable, "-m", "profkit.cli", "analyse", *args], capture_output=True, text=True,
                          env=env, timeout=900)


def test_the_main_job_fits_one_screen(tmp_path):
    db, html = str(tmp_path / "m.db"), tmp_path / "roofline.html"
    r = _main_job(str(PROFILES), "--db", db, "--html", str(html))
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    runs = sorted(p.name for p in PROFILES.iterdir() if p.is_dir())
    assert len(lines) <= 60  # one screen
    # two lines a run, in the order they landed: its line, then what to fix first, whole at 100 columns
    assert [x.split()[0] for x in lines[1:1 + 2 * len(runs):2]] == runs
    fixes = lines[2:2 + 2 * len(runs):2]
    assert all(x.startswith("    fix first: ") for x in fixes)
    i = runs.index("rmsnorm-eager-vs-triton-h200")
    assert "dram 99%" in lines[1 + 2 * i]
    assert fixes[i] == "    fix first: fuse the 8 kernels of each call into one (574 us) [rmsnorm/eager/qwen7b-t4096]"
    assert any("rmsnorm/qwen7b-t4096" in x and "eager -> triton" in x and "supported" in x for x in lines)
    assert f"{html} (open it in a browser)" in r.stdout and html.exists()
    verbose = _main_job(str(PROFILES), "--db", db, "--html", str(html), "--verbose")
    assert verbose.returncode == 0 and len(verbose.stdout.splitlines()) > 4 * len(lines)
    assert "what to fix first in run rmsnorm-eager-vs-triton-h200" in verbose.stdout


def _examples(help_text: str) -> list[list[str]]:
    lines = [l.strip().removeprefix("Example:").strip() for l in help_text.splitlines()]
    cmds = [l.split("  #")[0].split(" > ")[0] for l in lines if l.startswith("profkit ")]
    return [shlex.split(c)[1:] for c in cmds]


def test_every_command_shows_an_example_that_parses():
    # issue 18.6: help text with an example for every command; each example's options exist
    # and its required parameters are there (click parses it exactly as the shell would pass it)
    from profkit.cli import cli
    assert CliRunner().invoke(cli, ["--version"]).output.startswith("profkit, version ")
    for name, cmd in cli.commands.items():
        text = CliRunner().invoke(cli, [name, "--help"], env={"COLUMNS": "200"}).output
        examples = _examples(text)
        assert examples, f"profkit {name} --help has no example"
        for args in examples:
            assert args[0] == name, (name, args)
            with cmd.make_context(name, args[1:], resilient_parsing=False) as ctx:
                assert ctx.command is cmd
