"""profkit capture --ranks: one Nsight Systems report per rank of a torchrun job, and ncu on
chosen ranks, all under OUT/<run>/ as <run>.rank<N>.* so that ingest gives each its rank.

    profkit capture --ranks [--ncu-ranks 0] -- torchrun --nproc-per-node 2 train.py ARGS

The torchrun command is rewritten so that each worker starts through profkit.capture.rank_worker
(`torchrun OPTS --no-python PYTHON -m profkit.capture.rank_worker --prefix [nsys ...] -- PYTHON -u
train.py ARGS`), which names the report after the rank torchrun gave it. The job runs once
under nsys (every rank), then once more with ncu on the --ncu-ranks only (the others run
bare). ncu never profiles NCCL kernels: replaying a collective on one rank would wait
forever for peers that do not replay it.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from profkit.capture.options import CaptureOptions
from profkit.capture.session import Captured, _profile, find_tool, ncu_args, nsys_args, run_metadata
from profkit.core import environment
from profkit.core.errors import ProfkitError, ToolFailed
from profkit.store.ingest import rank_in_name

# torchrun options that take no value (every other option takes one unless written --opt=value)
_TORCHRUN_FLAGS = {
    "--standalone",
    "--no-python",
    "--no_python",
    "-m",
    "--module",
    "--run-path",
    "--run_path",
    "--virtual-local-rank",
    "--virtual_local_rank",
}
_LAUNCHER_MODULES = ("torch.distributed.run", "torch.distributed.launch")
# every kernel whose function name does not start with "nccl" (a positive pattern: no lookahead needed)
NOT_NCCL = "regex:^([^n]|n[^c]|nc[^c]|ncc[^l]).*$"


def split_launcher(cmd: list[str], python: str | None = None) -> tuple[list[str], list[str]]:
    """torchrun's own arguments (without -m/--no-python) and the worker command it would run."""
    if not cmd:
        raise ProfkitError("--ranks needs a launcher command: -- torchrun --nproc-per-node N script.py")
    name = os.path.basename(cmd[0])
    if name == "torchrun":
        i = 1
    elif name.startswith("python") and len(cmd) > 2 and cmd[1] == "-m" and cmd[2] in _LAUNCHER_MODULES:
        i = 3
    else:
        raise ProfkitError(
            f"--ranks understands torchrun (or python -m torch.distributed.run), not {cmd[0]!r}; "
            "with another launcher, start each worker as `python -m profkit.capture.rank_worker --prefix "
            '\'["nsys", "profile", "-o", "DIR/RUN.rank{rank}"]\' -- COMMAND` and ingest DIR'
        )
    launcher, module, no_python = list(cmd[:i]), False, False
    while i < len(cmd) and cmd[i].startswith("-"):
        opt = cmd[i]
        key = opt.split("=", 1)[0]
        if opt == "--":
            i += 1
            break
        if key in ("-m", "--module"):
            module = True
        elif key in ("--no-python", "--no_python"):
            no_python = True
        elif key in _TORCHRUN_FLAGS or "=" in opt:
            launcher.append(opt)
        else:
            launcher += cmd[i : i + 2]
            i += 1
        i += 1
    if i >= len(cmd):
        raise ProfkitError(f"no training script in the launcher command: {' '.join(cmd)}")
    if no_python:
        worker = list(cmd[i:])
    else:
        worker = [python or sys.executable, "-u"] + (["-m"] if module else []) + list(cmd[i:])
    return launcher, worker


def wrapped(
    launcher: list[str], worker: list[str], prefix: list[str], ranks=None, python: str | None = None
) -> list[str]:
    """The launcher command that starts each worker under `prefix` (on `ranks`, or all)."""
    w = [python or sys.executable, "-m", "profkit.capture.rank_worker", "--prefix", json.dumps(prefix)]
    if ranks is not None:
        w += ["--ranks", ",".join(str(r) for r in sorted(ranks))]
    return launcher + ["--no-python"] + w + ["--"] + worker


def _rank_files(folder: Path, run: str, suffix: str) -> dict[int, Path]:
    out = {}
    for f in folder.glob(f"{run}.rank*{suffix}"):
        r = rank_in_name(f)
        if r is not None and f.name == f"{run}.rank{r}{suffix}":
            out[r] = f
    return dict(sorted(out.items()))


def capture_ranks(opts: CaptureOptions, progress=None, python: str | None = None) -> Captured:
    """Capture the torchrun job `opts.command`: nsys on every rank (opts.use_nsys), ncu on
    opts.ncu_ranks; `progress(line)` gets ncu's output lines; `python`: the workers' interpreter."""
    command, run, ncu_ranks = list(opts.command or ()), opts.run, opts.ncu_ranks
    launcher, worker = split_launcher(command, python)
    if not opts.use_nsys and not ncu_ranks:
        raise ProfkitError("nothing to capture: --no-nsys and no --ncu-ranks")
    folder = opts.out / run
    folder.mkdir(parents=True, exist_ok=True)
    # an earlier capture's reports of the passes run now must not mix in (the other pass's stay:
    # `--no-nsys --ncu-ranks 0` adds counters to a run whose timelines were captured before)
    for suffix in (".nsys-rep", ".nsys.sqlite") * opts.use_nsys + (".ncu-rep",) * bool(ncu_ranks):
        for f in _rank_files(folder, run, suffix).values():
            f.unlink()
    tools: dict[str, str] = {}
    if opts.use_nsys:
        tools["nsys"] = find_tool("nsys", opts.nsys)
    if ncu_ranks:
        tools["ncu"] = find_tool("ncu", opts.ncu)
    got = Captured(run, folder, meta=run_metadata(command, tools))
    got.meta["ranks_capture"] = {"launcher": launcher, "worker": worker, "ncu_ranks": sorted(ncu_ranks)}
    got.meta.update(environment.gpus())
    base = str(folder / f"{run}.rank{{rank}}")
    if opts.use_nsys:
        _profile(
            wrapped(launcher, worker, nsys_args(tools["nsys"], Path(base), []), python=python), "nsys (every rank)"
        )
        reps = _rank_files(folder, run, ".nsys-rep")
        if not reps:
            raise ToolFailed(f"nsys wrote no per-rank report ({run}.rank<N>.nsys-rep missing in {folder})")
        for r, rep in reps.items():
            sqlite = folder / f"{run}.rank{r}.nsys.sqlite"
            _profile(
                [tools["nsys"], "export", "--type", "sqlite", "--force-overwrite", "true", "-o", str(sqlite), str(rep)],
                f"nsys export rank {r}",
            )
            if not sqlite.exists():
                raise ToolFailed(f"nsys wrote no export for rank {r} ({sqlite} missing)")
            got.files.append(sqlite)
    if ncu_ranks:
        prefix = ncu_args(
            tools["ncu"], Path(base), [], opts.metrics, list(opts.include), opts.clock_control, source=opts.source
        )
        prefix += ["--kernel-name", NOT_NCCL]
        _profile(wrapped(launcher, worker, prefix, set(ncu_ranks), python=python), "ncu", progress)
        reps = _rank_files(folder, run, ".ncu-rep")
        missing = sorted(set(ncu_ranks) - set(reps))
        if missing:
            raise ToolFailed(f"ncu wrote no report for rank(s) {missing} in {folder}")
        got.files += list(reps.values())
    (folder / "capture.json").write_text(json.dumps(got.meta, indent=2, default=str) + "\n")
    return got


def parse_ranks(text: str) -> list[int]:
    """'0,1' -> [0, 1]; '' -> []."""
    try:
        ranks = sorted({int(r) for r in text.split(",") if r.strip()})
    except ValueError:
        raise ProfkitError(f"--ncu-ranks: expected ranks like 0 or 0,1, got {text!r}") from None
    if any(r < 0 for r in ranks):
        raise ProfkitError(f"--ncu-ranks: ranks are >= 0, got {text!r}")
    return ranks


def worker_name(worker: list[str]) -> str:
    """A default run name: the worker's module (last part) or script name."""
    if "-m" in worker[:3] and worker.index("-m") + 1 < len(worker):
        return worker[worker.index("-m") + 1].rsplit(".", 1)[-1]
    if worker[1:2] == ["-u"] and len(worker) > 2:  # PYTHON -u script.py (split_launcher's form)
        return Path(worker[2]).stem
    return Path(worker[0]).stem
