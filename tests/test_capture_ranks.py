"""profkit capture --ranks without a GPU: the torchrun rewrite, the per-rank worker, NVLink
multicast forced off in everything launched, and a whole capture of the real DDP step under
torchrun (gloo, 2 processes) with fake nsys/ncu that write real reports."""
import json
import os
import shutil
import stat
import sys

import pytest
from click.testing import CliRunner
from profdata import KNOWN_NCU_LEAN, KNOWN_NSYS

from profkit.capture import rank_worker
from profkit.capture import session as cap
from profkit.capture.ranks import NOT_NCCL, parse_ranks, split_launcher, worker_name, wrapped
from profkit.cli import cli
from profkit.core.errors import ProfkitError
from profkit.store.store import Store

TORCHRUN = shutil.which("torchrun", path=os.path.dirname(sys.executable)) or shutil.which("torchrun")


def test_torchrun_command_is_split_into_launcher_and_worker():
    l, w = split_launcher(["torchrun", "--nproc-per-node", "2", "-m", "profkit.kernels.ddp_step", "--steps", "3"], "PY")
    assert l == ["torchrun", "--nproc-per-node", "2"] and w == ["PY", "-u", "-m", "profkit.kernels.ddp_step", "--steps", "3"]
    l, w = split_launcher(["torchrun", "--standalone", "--nnodes=1", "--nproc-per-node", "2", "train.py", "--lr", "1"], "PY")
    assert l == ["torchrun", "--standalone", "--nnodes=1", "--nproc-per-node", "2"] and w == ["PY", "-u", "train.py", "--lr", "1"]
    l, w = split_launcher(["python3", "-m", "torch.distributed.run", "--no-python", "--nproc-per-node", "2", "./a.out", "x"])
    assert l == ["python3", "-m", "torch.distributed.run", "--nproc-per-node", "2"] and w == ["./a.out", "x"]
    assert worker_name(["PY", "-u", "-m", "profkit.kernels.ddp_step"]) == "ddp_step"
    assert worker_name(["PY", "-u", "train.py"]) == "train"
    with pytest.raises(ProfkitError, match="understands torchrun"):
        split_launcher(["mpirun", "-n", "2", "python", "x.py"])
    with pytest.raises(ProfkitError, match="no training script"):
        split_launcher(["torchrun", "--nproc-per-node", "2"])


def test_wrapped_command_starts_each_worker_through_rank_worker():
    cmd = wrapped(["torchrun", "--nproc-per-node", "2"], ["PY", "-u", "t.py"], ["ncu", "-o", "d/r.rank{rank}"], {1, 0},
                  python="PY")
    assert cmd == ["torchrun", "--nproc-per-node", "2", "--no-python", "PY", "-m", "profkit.capture.rank_worker",
                   "--prefix", '["ncu", "-o", "d/r.rank{rank}"]', "--ranks", "0,1", "--", "PY", "-u", "t.py"]
    assert parse_ranks("1, 0,1") == [0, 1] and parse_ranks("") == []
    with pytest.raises(ProfkitError):
        parse_ranks("a")


def test_rank_worker_profiles_chosen_ranks_with_multicast_off(monkeypatch):
    ran = []
    monkeypatch.setattr(os, "execvp", lambda exe, args: ran.append((args, dict(os.environ))))
    monkeypatch.setenv("NCCL_NVLS_ENABLE", "1")
    prefix = json.dumps(["nsys", "profile", "-o", "out/r.rank{rank}"])
    for rank in ("0", "1"):
        monkeypatch.setenv("RANK", rank)
        assert rank_worker.main(["--prefix", prefix, "--ranks", "1", "--", "python", "t.py"]) == 0
    assert ran[0][0] == ["python", "t.py"]  # rank 0 not chosen: runs bare
    assert ran[1][0] == ["nsys", "profile", "-o", "out/r.rank1", "python", "t.py"]
    for _, env in ran:
        assert {k: env[k] for k in cap.SAFE_ENV} == {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
                                                   "NVSHMEM_DISABLE_NVLS": "1"}
    monkeypatch.delenv("RANK")
    assert rank_worker.main(["--prefix", prefix, "--", "python", "t.py"]) == 2  # no rank: refused


FAKE = r'''#!{python}
"""A fake {tool}: logs its argv and environment, runs the workload, writes a real report."""
import json, os, shutil, sqlite3, subprocess, sys, lzma
argv = sys.argv[1:]
log = {log!r}
with open(log, "a") as f:
    f.write(json.dumps({{"tool": "{tool}", "argv": argv, "env": {{k: os.environ.get(k) for k in
        ("NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS", "RANK")}}}}) + "\n")
if argv[:1] == ["--version"]:
    print("fake {tool} 1.0"); sys.exit(0)
if argv[:1] == ["export"]:  # nsys export ... -o OUT REP: a real export, made unique per rank
    out = argv[argv.index("-o") + 1]
    shutil.copy({nsys_sqlite!r}, out)
    c = sqlite3.connect(out); c.execute("UPDATE META_DATA_EXPORT SET value = ? WHERE name = 'EXPORT_PARAM_INPUT_FILE'",
                                        (argv[-1],)); c.commit(); c.close()
    sys.exit(0)
out = argv[argv.index("-o") + 1]
cmd = argv[next(i for i, a in enumerate(argv) if os.path.basename(a).startswith("python")):]  # the worker
rc = subprocess.call(cmd)
if "{tool}" == "nsys":
    open(out + ".nsys-rep", "wb").write(b"fake")
else:
    open(out + ".ncu-rep", "wb").write(lzma.open({ncu_xz!r}).read())
sys.exit(rc)
'''


def fake(tmp_path, tool, log):
    p = tmp_path / tool
    p.write_text(FAKE.format(python=sys.executable, tool=tool, log=str(log), nsys_sqlite=str(KNOWN_NSYS),
                             ncu_xz=str(KNOWN_NCU_LEAN)))
    p.chmod(p.stat().st_mode | stat.S_IEXEC)
    return str(p)


def test_single_process_capture_launches_with_multicast_off(tmp_path, monkeypatch):
    log = tmp_path / "log.jsonl"
    monkeypatch.setenv("NCCL_NVLS_ENABLE", "1")
    monkeypatch.setenv("NVSHMEM_DISABLE_NVLS", "0")
    r = CliRunner().invoke(cli, ["capture", "--db", str(tmp_path / "d.db"), "--out", str(tmp_path / "p"), "--no-ncu",
                                 "--nsys-path", fake(tmp_path, "nsys", log), "--run", "one", "--",
                                 sys.executable, "-c", "print('hi')"])
    assert r.exit_code == 0, r.output
    calls = [json.loads(l) for l in log.read_text().splitlines()]
    launched = [c for c in calls if c["argv"][:1] != ["--version"]]
    assert [c["argv"][0] for c in launched] == ["profile", "export"]
    for c in launched:
        assert c["env"]["NCCL_NVLS_ENABLE"] == "0" and c["env"]["TORCH_SYMM_MEM_DISABLE_MULTICAST"] == "1"
        assert c["env"]["NVSHMEM_DISABLE_NVLS"] == "1"
    meta = json.loads((tmp_path / "p" / "one" / "capture.json").read_text())
    assert meta["env"]["NCCL_NVLS_ENABLE"] == "0"


@pytest.mark.slow
@pytest.mark.skipif(not TORCHRUN, reason="torchrun not installed")
def test_two_rank_capture_of_the_ddp_step_under_torchrun(tmp_path):
    """Real torchrun, real DDP step (gloo): nsys on every rank, ncu on rank 0 only, NCCL
    kernels excluded from ncu, every launched process with multicast off; the reports land
    in one run with ranks 0 and 1."""
    log = tmp_path / "log.jsonl"
    db = str(tmp_path / "d.db")
    r = CliRunner().invoke(cli, [
        "capture", "--db", db, "--out", str(tmp_path / "p"), "--ranks", "--ncu-ranks", "0",
        "--nsys-path", fake(tmp_path, "nsys", log), "--ncu-path", fake(tmp_path, "ncu", log), "--",
        TORCHRUN, "--nproc-per-node", "2", "--master-port", "29517", "-m", "profkit.kernels.ddp_step",
        "--steps", "2", "--warmup", "1", "--hidden", "32", "--tokens", "16", "--slow-rank", "1"])
    assert r.exit_code == 0, r.output
    calls = [json.loads(l) for l in log.read_text().splitlines() if '"--version"' not in l]
    profiled = sorted((c["tool"], c["env"]["RANK"]) for c in calls if c["argv"][0] != "export")
    assert profiled == [("ncu", "0"), ("nsys", "0"), ("nsys", "1")]
    for c in calls:
        assert (c["env"]["NCCL_NVLS_ENABLE"], c["env"]["TORCH_SYMM_MEM_DISABLE_MULTICAST"],
                c["env"]["NVSHMEM_DISABLE_NVLS"]) == ("0", "1", "1")
    ncu = next(c for c in calls if c["tool"] == "ncu")
    assert ncu["argv"][ncu["argv"].index("--kernel-name") + 1] == NOT_NCCL
    assert ncu["argv"][ncu["argv"].index("-o") + 1].endswith("ddp_step.rank0")
    folder = tmp_path / "p" / "ddp_step"
    assert sorted(f.name for f in folder.iterdir()) == [
        "capture.json", "ddp_step.rank0.ncu-rep", "ddp_step.rank0.nsys-rep", "ddp_step.rank0.nsys.sqlite",
        "ddp_step.rank1.nsys-rep", "ddp_step.rank1.nsys.sqlite"]
    assert "run ddp_step rank 1" in r.output
    s = Store(db)
    try:
        rows = s.query("SELECT rank, source, count(*) n FROM kernels WHERE run = 'ddp_step' GROUP BY 1, 2 ORDER BY 1, 2")
        assert rows == [{"rank": 0, "source": "nsys", "n": 166}, {"rank": 1, "source": "nsys", "n": 166}]
        # rank 0's counters attach to rank 0's timeline launches only
        assert s.query("SELECT DISTINCT rank FROM counters WHERE run = 'ddp_step'") == [{"rank": 0}]
        assert s.query("SELECT count(*) n FROM launch WHERE source = 'ncu' AND timeline_id IS NULL") == [{"n": 0}]
        meta = json.loads(s.query("SELECT meta FROM runs WHERE run = 'ddp_step'")[0]["meta"])
        assert meta["ranks_capture"]["ncu_ranks"] == [0] and meta["env"]["NCCL_NVLS_ENABLE"] == "0"
    finally:
        s.close()


def test_source_flag_reaches_ncu(tmp_path):
    """`capture --source`: ncu records Source Counters with the source embedded; without the flag
    it records neither (they cost a replay pass per kernel)."""
    runs = {}
    for flag in ([], ["--source"]):
        log = tmp_path / f"log{len(flag)}.jsonl"
        r = CliRunner().invoke(cli, ["capture", "--db", str(tmp_path / f"d{len(flag)}.db"), "--out",
                                     str(tmp_path / f"p{len(flag)}"), "--no-nsys", *flag,
                                     "--ncu-path", fake(tmp_path, "ncu", log), "--run", "one", "--",
                                     sys.executable, "-c", "print('hi')"])
        assert r.exit_code == 0, r.output
        calls = [json.loads(l) for l in log.read_text().splitlines()]
        runs[bool(flag)] = next(c["argv"] for c in calls if c["argv"][:1] != ["--version"])
    with_src, without = runs[True], runs[False]
    assert with_src[with_src.index("--import-source") + 1] == "yes"
    assert with_src[with_src.index("SourceCounters") - 1] == "--section"
    assert "--import-source" not in without and "SourceCounters" not in without
