"""File and database names with spaces, non-ASCII and URI-special characters (# ? %) work
through the CLI; no subprocess goes through a shell.

SQLite opens read-only files by URI, where '#', '?' and '%' mean something: before the fix
`a#b.nsys.sqlite` opened (and created) a file named `a`.
"""
import ast
import importlib.util
import json
import lzma
import re
import shutil

import pytest
from click.testing import CliRunner
from profdata import DATA, KNOWN_CSV_LEAN, KNOWN_CUPTI, PROFILES, ROOT

from profkit.cli import cli

CAPTURE = PROFILES / "cuda-vs-triton-h200"
NAMES = ["ñ 報告", "a#b ?c", "100% d%41"]  # %41 would decode to 'A' if it were not escaped


def run(*args):
    r = CliRunner().invoke(cli, [str(a) for a in args])
    assert "Traceback" not in r.output
    return r


@pytest.fixture
def odd(tmp_path):
    d = tmp_path / "Prüfung run #1"
    d.mkdir()
    return d


@pytest.mark.parametrize("name", NAMES)
def test_ingest_and_sql_with_odd_names(odd, name):
    db = odd / f"daten {name}.db"
    nsys = shutil.copy(CAPTURE / "cuda-vs-triton-h200.nsys.sqlite", odd / f"{name}.nsys.sqlite")
    ncu = shutil.copy(CAPTURE / "cuda-vs-triton-h200.ncu-rep.xz", odd / f"{name}.ncu-rep.xz")
    r = run("ingest", "--db", db, nsys, ncu)
    assert r.exit_code == 0, r.output
    assert f"{name}.nsys.sqlite: nsys-sqlite -> run {name}: 45 kernels, 18 NVTX ranges" in r.output
    assert f"{name}.ncu-rep.xz: ncu-rep -> run {name}: 18 kernels, 0 NVTX ranges, 7560 counters" in r.output
    r = run("sql", "--db", db, "--json", "SELECT run, count(*) AS n, count(DISTINCT source) AS s FROM kernels GROUP BY run")
    assert r.exit_code == 0, r.output
    assert json.loads(r.output) == [{"run": name, "n": 45, "s": 1}]  # the 18 ncu launches sit on the timeline
    r = run("sql", "--db", db, "--csv", "SELECT json_extract(source_files, '$[0]') AS f FROM runs")
    assert r.output.splitlines()[1].endswith(f"{name}.nsys.sqlite")
    if importlib.util.find_spec("pyarrow"):  # export reads the database read-only by URI too
        r = run("export", "--db", db, "--parquet", odd / f"parquet {name}")
        assert r.exit_code == 0 and "kernels: 45 rows" in r.output, r.output
        shutil.rmtree(odd / f"parquet {name}")
    # nothing else appeared beside them (a URI cut at '#' or '?' used to create a stray file)
    assert sorted(p.name for p in odd.iterdir() if not p.name.startswith(f"daten {name}.db")) == \
        sorted([f"{name}.nsys.sqlite", f"{name}.ncu-rep.xz"])


def test_every_format_with_odd_names(odd):
    db = odd / "ü db.db"
    raw = odd / "ñ 報告 #3.ncu-rep"  # uncompressed: NVIDIA's reader opens this path itself
    raw.write_bytes(lzma.decompress((DATA / "known" / "rmsnorm-llama8b-t32768.ncu-rep.xz").read_bytes()))
    csv = shutil.copy(KNOWN_CSV_LEAN, odd / "ñ 報告 #4.raw.csv")
    trace = shutil.copy(KNOWN_CUPTI, odd / "ñ 報告 #5.cupti.jsonl")
    for f, want in ((raw, "27 kernels"), (csv, "133 kernels"), (trace, "166 kernels")):
        r = run("ingest", "--db", db, f)
        assert r.exit_code == 0 and want in r.output, r.output
    r = run("sql", "--db", db, "--csv", "SELECT run FROM runs ORDER BY run")
    assert r.output.splitlines()[1:] == ["ñ 報告 #3", "ñ 報告 #4", "ñ 報告 #5"]


def test_analyse_a_profiles_folder_with_odd_names(odd):
    root = odd / "profiles ü"
    folder = root / "ñ 報告 #2"
    folder.mkdir(parents=True)
    shutil.copy(CAPTURE / "cuda-vs-triton-h200.nsys.sqlite", folder / "ñ 報告.nsys.sqlite")
    shutil.copy(CAPTURE / "cuda-vs-triton-h200.ncu-rep.xz", folder / "ñ 報告.ncu-rep.xz")
    shutil.copy(CAPTURE / "capture.json", folder / "capture.json")
    db, html = odd / "a#b.db", odd / "roof ü.html"
    r = run("analyse", root, "--db", db, "--html", html, "--verbose")
    assert r.exit_code == 0, r.output
    assert "-> run ñ 報告 #2: 45 kernels, 18 ranges, 0 counters" in r.output
    assert "-> run ñ 報告 #2: 18 kernels, 0 ranges, 7560 counters" in r.output
    assert html.exists()
    r = run("analyse", root, "--db", db, "--html", html)  # the one-line-per-run view, loaded already
    assert r.exit_code == 0 and "\nñ 報告 #2 " in r.output and "0 files loaded now, 2 already in" in r.output, r.output
    r = run("sql", "--db", db, "--csv", "SELECT count(*) AS n FROM classifications WHERE run = 'ñ 報告 #2'")
    assert r.exit_code == 0 and int(r.output.splitlines()[1]) > 0, r.output


# --- no shell anywhere ----------------------------------------------------------------------------

_SHELL_CALLS = {("os", "system"), ("os", "popen"), ("subprocess", "getoutput"), ("subprocess", "getstatusoutput"),
                ("asyncio", "create_subprocess_shell"), ("pty", "spawn")}
_SUBPROCESS = {"run", "Popen", "call", "check_call", "check_output"}


def _sources():
    skip = {".venv", "build", ".git", "node_modules"}
    for p in ROOT.rglob("*.py"):
        if not skip & set(p.relative_to(ROOT).parts) and ".egg-info" not in str(p):
            yield p, p.read_text(encoding="utf-8")
    for nb in ROOT.rglob("*.ipynb"):
        if not skip & set(nb.relative_to(ROOT).parts) and ".ipynb_checkpoints" not in str(nb):
            cells = json.loads(nb.read_text(encoding="utf-8"))["cells"]
            for c in cells:
                if c["cell_type"] == "code":
                    src = "".join(c["source"])
                    assert not re.search(r"^\s*!", src, re.M), f"{nb}: a shell escape (!) in a code cell"
                    yield nb, "\n".join(x for x in src.splitlines() if not x.lstrip().startswith("%"))


def _name(node) -> tuple:
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return (node.value.id, node.attr)
    if isinstance(node, ast.Name):
        return ("", node.id)
    return ()


def _stringy(node) -> bool:
    """A str literal, an f-string, or str concatenation/%-formatting (not list + list)."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    if isinstance(node, ast.JoinedStr):
        return True
    return isinstance(node, ast.BinOp) and (_stringy(node.left) or _stringy(node.right))


def test_no_subprocess_goes_through_a_shell():
    """shell=True, os.system/os.popen and a command given as one string are all refused."""
    found, n = [], 0
    for path, src in _sources():
        n += 1
        tree = ast.parse(src)
        # bare names count only where imported from subprocess (`from subprocess import run`)
        bare = {a.asname or a.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                and node.module == "subprocess" for a in node.names}
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            name = _name(node.func)
            where = f"{path.relative_to(ROOT)}:{node.lineno}"
            if name in _SHELL_CALLS:
                found.append(f"{where}: {'.'.join(name)}")
            if name and (name[0] == "subprocess" and name[1] in _SUBPROCESS or name[0] == "" and name[1] in bare):
                if any(k.arg == "shell" and not (isinstance(k.value, ast.Constant) and k.value.value is False)
                       for k in node.keywords):
                    found.append(f"{where}: shell=")
                if node.args and _stringy(node.args[0]):
                    found.append(f"{where}: a command as one string")
    assert n > 50  # the walk found the source tree
    assert found == []
