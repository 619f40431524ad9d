"""profkit tune and profkit bench on the CPU (TRITON_INTERPRET=1, tiny shapes): the user's
kernel and workload files of docs/examples, every trial checked against the reference,
recorded, resumable, a wrong configuration or variant caught and never chosen or timed."""
import json
import textwrap

import pytest
from click.testing import CliRunner
from profdata import ROOT

from profkit.capture import tune as t
from profkit.cli import cli
from profkit.store.store import Store

EXAMPLE = ROOT / "docs" / "examples" / "vector_add.py"
WORKLOAD = ROOT / "docs" / "examples" / "scale_workload.py"


def _run(*args):
    return CliRunner().invoke(cli, list(map(str, args)))


def _space(tmp_path, space: dict):
    p = tmp_path / "space.json"
    p.write_text(json.dumps(space))
    return p


def test_tune_checks_records_chooses_and_resumes(tmp_path):
    db = tmp_path / "t.db"
    space = _space(tmp_path, {"BLOCK": [64, 256], "num_warps": [1, 4]})
    r = _run("tune", f"{EXAMPLE}:add_kernel", "--shape", "n=3000", "--shape", "n=700", "--space", space, "--db", db)
    assert r.exit_code == 0, r.output
    assert "4 configs (4 tried now, 0 from earlier runs), 0 failed or wrong" in r.output
    with Store(db) as s:
        rows = s.query("SELECT shape, config, ok, ms, rel_err, chosen FROM tuning ORDER BY shape, config")
    assert len(rows) == 8 and all(x["ok"] == 1 and x["ms"] > 0 and x["rel_err"] < 1e-2 for x in rows)
    assert sum(x["chosen"] for x in rows) == 2  # one per shape
    for shape in ({"n": 3000}, {"n": 700}):
        chosen = [x for x in rows if x["chosen"] and json.loads(x["shape"]) == shape][0]
        fastest = min((x for x in rows if json.loads(x["shape"]) == shape), key=lambda x: x["ms"])
        assert chosen["config"] == fastest["config"]
        assert t.best(str(db), "vector_add:add_kernel", shape, "cpu") == json.loads(chosen["config"])
    # a second run reuses every trial
    r = _run("tune", f"{EXAMPLE}:add_kernel", "--shape", "n=3000", "--space", space, "--db", db)
    assert "(0 tried now, 4 from earlier runs)" in r.output


def test_a_wrong_configuration_is_caught_and_never_chosen(tmp_path):
    """The launcher of this copy drops the last block when asked (a known-wrong candidate)."""
    src = EXAMPLE.read_text().replace(
        "add_kernel[(triton.cdiv(n, block),)]",
        "add_kernel[(triton.cdiv(n, block) - config.get('DROP_LAST', 0),)]")
    mod = tmp_path / "buggy_add.py"
    mod.write_text(src)
    db = tmp_path / "t.db"
    space = _space(tmp_path, [{"BLOCK": 256, "DROP_LAST": 0}, {"BLOCK": 256, "DROP_LAST": 1}])
    r = _run("tune", f"{mod}:add_kernel", "--shape", "n=1000", "--space", space, "--db", db)
    assert r.exit_code == 0, r.output
    with Store(db) as s:
        rows = {json.loads(x["config"])["DROP_LAST"]: x for x in s.query("SELECT config, ok, ms, chosen, error FROM tuning")}
    assert rows[1]["ok"] == 0 and rows[1]["ms"] is None and "wrong result" in rows[1]["error"] and not rows[1]["chosen"]
    assert rows[0]["ok"] == 1 and rows[0]["chosen"]


def test_default_space_from_the_signature_and_a_budget(tmp_path):
    target = t.load(f"{EXAMPLE}:add_kernel")
    space = t.default_space(target.kernel)
    assert space["BLOCK"] == list(t.BLOCK_1D) and space["num_warps"] == list(t.DEFAULT_WARPS)
    assert set(space) == {"BLOCK", "num_warps", "num_stages"}  # n and alpha are not constexprs
    db = tmp_path / "t.db"
    r = _run("tune", f"{EXAMPLE}:add_kernel", "--shape", "n=100", "--budget", "0", "--db", db)
    assert r.exit_code == 0 and "stopped: time budget of 0 s spent; run again to go on" in r.output, r.output


def test_changed_kernel_source_tunes_afresh(tmp_path):
    mod = tmp_path / "k.py"
    mod.write_text(EXAMPLE.read_text())
    db = tmp_path / "t.db"
    space = _space(tmp_path, {"BLOCK": [128], "num_warps": [2]})
    _run("tune", f"{mod}:add_kernel", "--shape", "n=500", "--space", space, "--db", db)
    mod.write_text(EXAMPLE.read_text().replace("(x + alpha * y)", "(alpha * y + x)"))
    r = _run("tune", f"{mod}:add_kernel", "--shape", "n=500", "--space", space, "--db", db)
    assert "(1 tried now, 0 from earlier runs)" in r.output
    with Store(db) as s:
        rows = s.query("SELECT source_hash, chosen FROM tuning")
    assert len(rows) == 2 and [x["chosen"] for x in rows].count(1) == 1  # only the newest source's choice


@pytest.mark.parametrize("args,text", [
    (["tune", "nocolon", "--shape", "n=1"], "name the kernel as MODULE:KERNEL"),
    (["tune", f"{EXAMPLE}:nope", "--shape", "n=1"], "has no 'nope' (kernel"),
    (["tune", f"{EXAMPLE}:inputs", "--shape", "n=1"], "inputs is not a @triton.jit kernel"),
    (["tune", f"{EXAMPLE}:add_kernel", "--shape", "n"], "write NAME=VALUE"),
    (["bench", "rmsnrm"], "no workload named 'rmsnrm'; did you mean rmsnorm"),
    (["bench", "rmsnorm", "--variant", "trition"], "no variant 'trition'"),
])
def test_bad_input_is_one_line(tmp_path, args, text):
    r = _run(*args, "--db", tmp_path / "t.db")
    assert r.exit_code == 2 and text in r.output and len(r.output.strip().splitlines()) == 1, r.output


@pytest.mark.parametrize("cmd", [["bench"], ["tune"]])
def test_a_user_file_that_fails_to_import_is_one_line(tmp_path, cmd):
    broken = tmp_path / "broken.py"
    broken.write_text("raise RuntimeError('boom')\n")
    r = _run(*cmd, f"{broken}:W", *(["--shape", "n=1"] if cmd == ["tune"] else []), "--db", tmp_path / "t.db")
    assert r.exit_code == 2 and "importing it failed: RuntimeError: boom" in r.output, r.output
    assert len(r.output.strip().splitlines()) == 1 and not (tmp_path / "t.db").exists()


def test_bad_space_file_is_one_line(tmp_path):
    p = tmp_path / "s.json"
    p.write_text('{"BLOCK": []}')
    r = _run("tune", f"{EXAMPLE}:add_kernel", "--shape", "n=1", "--space", p, "--db", tmp_path / "t.db")
    assert r.exit_code == 2 and "non-empty list" in r.output


def test_bench_a_user_workload_and_a_lab_operator(tmp_path):
    db = tmp_path / "b.db"
    md = tmp_path / "b.md"
    r = _run("bench", f"{WORKLOAD}:WORKLOAD", "--db", db, "--md", md)
    assert r.exit_code == 0, r.output
    r = _run("bench", "rmsnorm", "--variant", "eager", "--variant", "triton", "--db", db)
    assert r.exit_code == 0, r.output
    with Store(db) as s:
        rows = s.query("SELECT op, variant, shape, ok, ms, gbps, pct_of_copy, speedups, gpu, torch, date FROM bench")
    assert {(x["op"], x["variant"]) for x in rows} == {("scale", "eager"), ("scale", "triton"),
                                                       ("rmsnorm", "eager"), ("rmsnorm", "triton")}
    assert all(x["ok"] == 1 and x["ms"] > 0 and x["gbps"] > 0 and x["gpu"] == "cpu" and x["torch"] and x["date"]
               for x in rows)
    triton = next(x for x in rows if (x["op"], x["variant"]) == ("rmsnorm", "triton"))
    assert set(json.loads(triton["speedups"])) == {"eager"}  # against each baseline timed at the shape
    text = md.read_text()
    assert "| scale | tiny | triton |" in text and "CPU run (TRITON_INTERPRET=1)" in text


def test_bench_catches_a_wrong_variant_and_does_not_time_it(tmp_path):
    mod = tmp_path / "wrong_scale.py"
    mod.write_text(WORKLOAD.read_text() + textwrap.dedent('''
        WRONG = Workload(op="scale_wrong", setup=setup, model=model, shapes=WORKLOAD.shapes,
                         variants={"eager": lambda s: s["x"] * s["w"], "off_by_one": lambda s: s["x"] * s["w"] + 1},
                         reference=lambda s, variant: s["x"].double() * s["w"].double(), baselines=("eager",),
                         selftest={"tiny": {"rows": 3, "cols": 100}})
    '''))
    db = tmp_path / "b.db"
    r = _run("bench", f"{mod}:WRONG", "--db", db)
    assert r.exit_code == 0, r.output
    assert "scale_wrong/off_by_one/tiny: wrong result, not timed" in r.output
    with Store(db) as s:
        bad = s.query("SELECT ok, ms, rel_err FROM bench WHERE variant = 'off_by_one'")[0]
    assert bad["ok"] == 0 and bad["ms"] is None and bad["rel_err"] > 0.01


def test_bench_checks_each_variant_against_the_inputs_it_reads(tmp_path):
    """An in-place variant timed first (RoPE's triton_inplace) rotates the shape's inputs: the
    variants after it must be checked against those inputs, not the ones the shape started with."""
    db = tmp_path / "b.db"
    r = _run("bench", "rope", "--variant", "triton_inplace", "--variant", "triton", "--variant", "eager", "--db", db)
    assert r.exit_code == 0, r.output
    with Store(db) as s:
        rows = s.query("SELECT variant, shape, ok, rel_err, note FROM bench")
    assert {x["variant"] for x in rows} == {"triton_inplace", "triton", "eager"}
    assert all(x["ok"] == 1 and x["rel_err"] < 1e-2 for x in rows), rows
