"""profkit capture: run a workload under Nsight Systems and Nsight Compute (or the CUPTI
tracer) and keep the raw reports under OUT/<run>/ with what was captured (capture.json).
Loading them is ingest's job (the CLI hands the reports over, parsed once).

Every subprocess gets an argument list; nothing goes through a shell.
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import environment
from .errors import ProfkitError, ToolFailed, ToolMissing
from .metrics import metric_names
from .rows import KERNEL_FIELDS

# environment variables that change what a profile shows
RESULT_ENV = ("CUDA_VISIBLE_DEVICES", "CUDA_LAUNCH_BLOCKING", "CUBLAS_WORKSPACE_CONFIG", "TORCH_CUDNN_V8_API_ENABLED",
              "TRITON_INTERPRET", "TORCHINDUCTOR_MAX_AUTOTUNE", "NVIDIA_TF32_OVERRIDE", "PYTORCH_CUDA_ALLOC_CONF",
              "NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS", "OMP_NUM_THREADS")
# NVLink multicast stays off in everything capture launches: a program using it can take a
# shared host's GPUs out of service. Forced, not defaulted.
SAFE_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
PERM_HELP = ("no permission to read GPU performance counters (ERR_NVGPUCTRPERM): run as root, or set "
             "'options nvidia NVreg_RestrictProfilingToAdminUsers=0' for the nvidia module and reload it")


def launch_env(base: dict | None = None) -> dict:
    """The environment of a launched profiler or workload: `base` (default ours) with SAFE_ENV."""
    return {**(os.environ if base is None else base), **SAFE_ENV}


def find_tool(name: str, explicit: str | None = None) -> str:
    env = {"nsys": "NSYS", "ncu": "NCU"}[name]
    if explicit:  # an explicit path is used or refused, never silently replaced
        if os.path.isfile(explicit) and os.access(explicit, os.X_OK):
            return explicit
        raise ToolMissing(f"{explicit}: not an executable {name}")
    for cand in (os.environ.get(env), shutil.which(name)):
        if cand and os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    raise ToolMissing(f"{name} is not installed: put it on PATH, set ${env}, or pass --{name}-path PATH")


def workload_command(workload: str, variants=(), shapes=(), python: str | None = None,
                     check_out: Path | None = None) -> list[str]:
    cmd = [python or sys.executable, "-m", "profkit.kernels.run", workload]
    for v in variants:
        cmd += ["--variant", v]
    for s in shapes:
        cmd += ["--shape", s]
    if check_out:
        cmd += ["--check-out", str(check_out)]
    return cmd


def read_correctness(path: Path) -> dict | None:
    """The workload's reference checks ({range: {ok, rel_err, tol, ...}}), None if it wrote none."""
    try:
        got = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    return got if isinstance(got, dict) and got else None


def nvtx_filters(workload: str | None, variants=(), shapes=(), include=()) -> list[str]:
    """ncu --nvtx-include expressions. The lab pushes nested ranges op > variant > shape, and
    ncu reads '/' as nesting with a trailing '/' for push/pop ranges: 'op/variant/shape/'.
    (A single range whose name holds '/' matched no filter form on ncu 2025.3.)"""
    if include:
        return list(include)
    if not workload:
        return []
    if not variants:
        return [f"{workload}/"]
    if not shapes:
        return [f"{workload}/{v}/" for v in variants]
    return [f"{workload}/{v}/{s}/" for v in variants for s in shapes]


def nsys_args(nsys: str, out: Path, cmd: list[str], sample: bool = False) -> list[str]:
    return [nsys, "profile", "-t", "cuda,nvtx", "--sample=" + ("cpu" if sample else "none"),
            "--cpuctxsw=" + ("process-tree" if sample else "none"), "--force-overwrite", "true",
            "-o", str(out), *cmd]


def ncu_args(ncu: str, out: Path, cmd: list[str], metrics: str = "lean", filters=(),
             clock_control: str = "none") -> list[str]:
    args = [ncu, "--clock-control", clock_control, "--target-processes", "all", "-f", "-o", str(out)]
    if filters:
        args.append("--nvtx")
        for f in filters:
            args += ["--nvtx-include", f]
    if metrics == "full":
        args += ["--set", "full"]
    else:
        args += ["--metrics", ",".join(dict.fromkeys(metric_names(metrics)))]
    return args + cmd


@dataclass
class Captured:
    run: str
    folder: Path
    files: list[Path] = field(default_factory=list)
    meta: dict = field(default_factory=dict)
    reports: dict = field(default_factory=dict)  # file -> Parsed already parsed here (ingest reuses it)


def run_metadata(cmd: list[str], tools: dict[str, str]) -> dict:
    meta: dict = {"command": cmd, "host": socket.gethostname(),
                  "captured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                  "env": {k: v for k, v in launch_env().items() if k in RESULT_ENV}}
    meta.update(environment.gpu())
    v = environment.versions()
    meta.update(python=v.pop("python"), cuda=v.pop("cuda", None), **{f"{k}_version": x for k, x in v.items()})
    for name, exe in tools.items():
        try:
            v = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=60).stdout.strip()
            meta[f"{name}_version"] = v.splitlines()[-1] if v else None
        except (OSError, subprocess.TimeoutExpired):
            pass
    try:
        meta["git_revision"] = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                                              timeout=10, cwd=Path(__file__).parent).stdout.strip() or None
    except OSError:
        pass
    return meta


def _profile(args: list[str], what: str, progress=None) -> str:
    """Run a profiler; stream its output to `progress`; map failures to one clear error."""
    lines: list[str] = []
    with subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=launch_env()) as p:
        for line in p.stdout:  # type: ignore[union-attr]
            lines.append(line.rstrip("\n"))
            if progress:
                progress(line)
        rc = p.wait()
    text = "\n".join(lines)
    if "ERR_NVGPUCTRPERM" in text:
        raise ToolFailed(PERM_HELP)
    if rc != 0 or "The application returned an error code" in text:
        tail = [l for l in lines if l.strip() and not l.startswith("==PROF==")][-5:]
        raise ToolFailed(f"{what}: the workload failed (exit {rc}): " + " | ".join(tail))
    if "No kernels were profiled" in text:
        raise ToolFailed(f"{what}: no kernel matched the NVTX filter")
    return text


def capture(workload: str | None, command: list[str] | None, run: str, out: Path, *, variants=(), shapes=(),
            use_nsys: bool = True, use_ncu: bool = True, metrics: str = "lean", include=(), tracer: str = "auto",
            clock_control: str = "none", nsys: str | None = None, ncu: str | None = None, progress=None,
            expect=None) -> Captured:
    """Profile a lab workload or a command. `progress(line)` receives ncu's output lines;
    `expect(n)` learns how many launches ncu will profile, counted on the timeline first taken."""
    if bool(workload) == bool(command):
        raise ProfkitError("give either a WORKLOAD name or -- COMMAND, not both")
    folder = Path(out) / run
    folder.mkdir(parents=True, exist_ok=True)
    # a lab workload checks each variant against its float64 reference after its range
    # closes; the record goes into the run meta as `correctness` (profkit compare reads it)
    checks = folder.resolve() / "correctness.json" if workload else None
    if checks:
        checks.unlink(missing_ok=True)
    cmd = command or workload_command(workload, variants, shapes, check_out=checks)
    tools: dict[str, str] = {}
    if use_nsys and tracer in ("nsys", "auto"):
        try:
            tools["nsys"] = find_tool("nsys", nsys)
        except ToolMissing:
            if tracer == "nsys":
                raise
            tracer = "cupti"
    elif use_nsys:
        tracer = "cupti"
    if use_ncu:
        tools["ncu"] = find_tool("ncu", ncu)
    got = Captured(run, folder, meta=run_metadata(cmd, tools))
    if use_nsys and tracer != "cupti":
        base = folder / run
        _profile(nsys_args(tools["nsys"], base, cmd), "nsys")
        sqlite = folder / f"{run}.nsys.sqlite"
        _profile([tools["nsys"], "export", "--type", "sqlite", "--force-overwrite", "true", "-o", str(sqlite),
              str(base) + ".nsys-rep"], "nsys export")
        if not sqlite.exists():
            raise ToolFailed(f"nsys wrote no report ({sqlite} missing)")
        got.files.append(sqlite)
    elif use_nsys:
        trace = folder / f"{run}.cupti.jsonl"
        env = launch_env()
        inj = env.get("NVTX_INJECTION64_PATH") or _libcupti()
        if not inj:
            raise ToolMissing("CUPTI tracer: no libcupti found for NVTX_INJECTION64_PATH (pip install cupti-python)")
        env["NVTX_INJECTION64_PATH"] = inj
        args = [sys.executable, "-m", "profkit.cupti_tracer", "-o", str(trace), "--"]
        args += (["-m", "profkit.kernels.run", *cmd[3:]] if not command else
                 (cmd[1:] if Path(cmd[0]).name.startswith("python") else cmd))
        p = subprocess.run(args, capture_output=True, text=True, env=env)
        if p.returncode != 0:
            raise ToolFailed("CUPTI tracer: the workload failed: " + " | ".join(p.stderr.strip().splitlines()[-3:]))
        got.files.append(trace)
    if use_ncu:
        rep = folder / f"{run}.ncu-rep"
        filters = nvtx_filters(workload, variants, shapes, include)
        if expect and got.files:
            from profkit import parsers

            timeline = got.files[0]
            try:  # parsed once: ingest takes it from got.reports
                got.reports[timeline] = parsers.detect(timeline).parse(timeline)
            except Exception:  # a progress total is a nicety: ingest will report a bad file
                pass
            n = expected_launches(got.reports[timeline], filters) if timeline in got.reports else None
            if n:
                expect(n)
        _profile(ncu_args(tools["ncu"], folder / run, cmd, metrics, filters, clock_control), "ncu", progress)
        if not rep.exists():
            raise ToolFailed(f"ncu wrote no report ({rep} missing)")
        got.files.append(rep)
    if checks and (record := read_correctness(checks)):
        got.meta["correctness"] = record
        checks.unlink()  # kept in capture.json
    (folder / "capture.json").write_text(json.dumps(got.meta, indent=2, default=str) + "\n")
    return got


def expected_launches(report, filters) -> int | None:
    """Launches on a parsed timeline that ncu's NVTX filters select (None: cannot tell, e.g.
    regex or domain filters). Feeds the progress bar's total."""
    prefixes = []
    for f in filters:
        if f.startswith("regex:") or "@" in f:
            return None
        prefixes.append(f.rstrip("/"))
    at = KERNEL_FIELDS.index("nvtx_path")
    paths = [k[at] for k in report.kernels]
    if not prefixes:
        return len(paths)
    return sum(1 for p in paths if p and any(p == x or p.startswith(x + "/") for x in prefixes))


def _libcupti() -> str | None:
    import glob
    import importlib.util

    for mod in ("nvidia.cu13", "nvidia.cuda_cupti", "nvidia"):
        try:
            spec = importlib.util.find_spec(mod)
        except (ImportError, ValueError):
            continue
        for p in (spec.submodule_search_locations or []) if spec else []:
            hits = sorted(glob.glob(p + "/**/libcupti.so*", recursive=True))
            if hits:
                return hits[0]
    return None
