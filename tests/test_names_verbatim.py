"""Every name is text, never markup or terminal control (issue 17, item 2).

The issue: a run named `[/x]`, a file `a[/b]c.nsys.sqlite` or a kernel `evil[/x]kernel` ended
ingest in rich.errors.MarkupError after the run was committed, and then runs, kernels, classify,
timeline, analyse and sql (table mode) all crashed; `[bold]` in a name vanished; escape codes
in file names reached the terminal.

Here the real `known` capture (nsys export + ncu raw CSV of the same run) is renamed: a kernel
`evil[/x]kernel`, NVTX ranges `[bold]eager` (a `/` would split the NVTX path) and `tri<ESC>[31mton`, files under a folder
`a[` with an escape code in their name, the run `[/x]`. Everything must load, print every name
verbatim (control characters as \\x1b), and every command must keep working.
"""
import json
import shutil
import sqlite3

import pytest
from click.testing import CliRunner
from profdata import KNOWN_CSV_LEAN, KNOWN_NSYS

from profkit.cli import cli

KERNEL, EAGER, TRITON, RUN = "evil[/x]kernel", "[bold]eager", "tri\x1b[31mton", "[/x]"
SHOWN = {KERNEL: KERNEL, EAGER: EAGER, TRITON: "tri\\x1b[31mton", RUN: RUN}
RENAME = (("_rmsnorm_fwd", KERNEL), ("rmsnorm_eager", EAGER), ("rmsnorm_triton", TRITON))


def run(*args):
    r = CliRunner().invoke(cli, [str(a) for a in args])
    assert "Traceback" not in r.output and r.exception is None or isinstance(r.exception, SystemExit), r.output
    assert "\x1b" not in r.output, r.output  # no terminal control ever reaches the terminal
    return r


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    d = tmp_path_factory.mktemp("names") / "a["
    d.mkdir()
    base = "b]c\x1b[2J"  # a file name that would clear the screen
    nsys, raw = d / f"{base}.nsys.sqlite", d / f"{base}.raw.csv"
    shutil.copy(KNOWN_NSYS, nsys)
    c = sqlite3.connect(nsys)
    for old, new in RENAME:
        c.execute("UPDATE StringIds SET value = replace(value, ?, ?)", (old, new))
        if "text" in [r[1] for r in c.execute("PRAGMA table_info(NVTX_EVENTS)")]:
            c.execute("UPDATE NVTX_EVENTS SET text = replace(text, ?, ?)", (old, new))
    c.commit()
    c.close()
    text = KNOWN_CSV_LEAN.read_text()
    for old, new in RENAME:
        text = text.replace(old, new)
    raw.write_text(text)
    db = d.parent / "names.db"
    r = run("ingest", "--db", db, "--run", RUN, nsys, raw)
    assert r.exit_code == 0, r.output
    shown_file = str(nsys).replace("\x1b", "\\x1b")
    assert r.output.startswith(f"{shown_file}: nsys-sqlite -> run {RUN}: 166 kernels"), r.output
    return db, d


def test_names_are_stored_as_given(hostile):
    db, _ = hostile
    r = run("sql", "--db", db, "--json", "SELECT DISTINCT run, short_name, nvtx_path FROM kernels WHERE nvtx_path IS NOT NULL")
    got = json.loads(r.output)
    assert {g["run"] for g in got} == {RUN}
    assert KERNEL in {g["short_name"] for g in got}
    assert {"known/" + EAGER, "known/" + TRITON} <= {g["nvtx_path"] for g in got}


@pytest.mark.parametrize("cmd,names", [
    (["runs"], [RUN]),
    (["kernels", "--top", "50"], [KERNEL, EAGER, TRITON]),
    (["classify"], [EAGER, TRITON]),
    (["timeline"], [EAGER, TRITON]),
    (["timeline", "--ops", "known"], [EAGER]),
    (["compare", f"{RUN}:{EAGER}", f"{RUN}:{TRITON}"], [RUN, EAGER, TRITON]),
    (["advise"], [KERNEL]),
    (["ranks"], [RUN]),
    (["sql", "SELECT DISTINCT run, short_name, nvtx_path FROM kernels"], [RUN, KERNEL, EAGER, TRITON]),
    (["sql", "--csv", "SELECT DISTINCT short_name FROM kernels"], [KERNEL]),
], ids=lambda x: x[0] if isinstance(x, list) and x and x[0] in ("runs", "kernels", "classify", "timeline",
                                                                 "compare", "advise", "ranks", "sql") else None)
def test_every_command_prints_names_verbatim(hostile, cmd, names, tmp_path):
    db, _ = hostile
    r = run(*cmd, "--db", db)
    assert r.exit_code == 0, r.output
    for n in names:
        assert SHOWN[n] in r.output, (n, r.output)


def test_files_written_with_hostile_names(hostile, tmp_path):
    db, _ = hostile
    r = run("roofline", "--db", db, "-o", tmp_path / "r[b].html")
    assert r.exit_code == 0 and "r[b].html" in r.output, r.output
    html = (tmp_path / "r[b].html").read_text()
    assert "evil[\\u002fx]kernel" in html and "\x1b" not in html  # (plotly's JSON escapes '/')
    r = run("export", "--db", db, "--parquet", tmp_path / "pq")
    assert r.exit_code == 0, r.output
    assert (tmp_path / "pq" / "kernels").is_dir()


def test_analyse_of_a_folder_of_hostile_names(hostile, tmp_path):
    _, folder = hostile
    profiles = tmp_path / "profiles"
    (profiles / "[bold]run").mkdir(parents=True)
    for f in folder.iterdir():
        shutil.copy(f, profiles / "[bold]run" / f.name)
    r = run("analyse", profiles, "--db", tmp_path / "a.db", "--html", tmp_path / "a.html")
    assert r.exit_code == 0, r.output
    assert "\n[bold]run " in r.output, r.output  # the one line per run starts with its name
    r = run("analyse", profiles, "--db", tmp_path / "a.db", "--html", tmp_path / "a.html", "--verbose")
    assert r.exit_code == 0, r.output
    assert "[bold]run" in r.output and KERNEL in r.output, r.output  # every table: the top kernels too


def test_error_lines_print_names_as_text(hostile, tmp_path):
    db, _ = hostile
    r = run("kernels", "--db", db, "--run", "[red]nope\x1b]0;title\x07")
    assert r.exit_code == 5 and "'[red]nope\\x1b]0;title\\x07'" in r.output and "runs: [/x]" in r.output, r.output
    (tmp_path / "evil[").mkdir()
    bad = tmp_path / "evil[/x]\x1b[31m.nsys.sqlite"
    bad.write_bytes(b"SQLite format 3\x00" + b"\x00" * 50)
    r = run("ingest", "--db", tmp_path / "x.db", bad)
    assert r.exit_code == 2 and "evil[/x]\\x1b[31m.nsys.sqlite: truncated" in r.output, r.output
