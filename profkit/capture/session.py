"""profkit capture: run a workload under Nsight Systems and Nsight Compute (or the CUPTI
tracer) and keep the raw reports under OUT/<run>/ with what was captured (capture.json).
Loading them is ingest's job (the CLI hands the reports over, parsed once).

Every subprocess gets an argument list; nothing goes through a shell.
"""

from __future__ import annotations

import difflib
import glob
import json
import os
import re
import shutil
import socket
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from profkit.capture.options import CaptureOptions, Hooks
from profkit.core import environment, sampling
from profkit.core.errors import BadArgument, ProfkitError, ToolFailed, ToolMissing
from profkit.core.metrics import metric_names
from profkit.core.rows import KERNEL_FIELDS
from profkit.core.steps import STEP_RE
from profkit.parsers._ops import clean_torch_ranges

RESULT_ENV = environment.RESULT_ENV  # the variables whose values a capture records
# NVLink multicast stays off in everything capture launches: a program using it can take a
# shared host's GPUs out of service. Forced, not defaulted.
SAFE_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
PERM_HELP = (
    "no permission to read GPU performance counters (ERR_NVGPUCTRPERM): run as root, or set "
    "'options nvidia NVreg_RestrictProfilingToAdminUsers=0' for the nvidia module and reload it"
)


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


def workload_command(
    workload: str,
    variants=(),
    shapes=(),
    python: str | None = None,
    check_out: Path | None = None,
    iters: int | None = None,
    rotate: int | None = None,
    l2_fill: bool = False,
) -> list[str]:
    """The lab's runner for WORKLOAD; iters: calls of each variant inside its range (the runner's
    default, 3, where None); rotate: the calls cycle over this many copies of the inputs;
    l2_fill: the L2 filled with other data before each range (kernels/run.py)."""
    cmd = [python or sys.executable, "-m", "profkit.kernels.run", workload]
    for v in variants:
        cmd += ["--variant", v]
    for s in shapes:
        cmd += ["--shape", s]
    if check_out:
        cmd += ["--check-out", str(check_out)]
    if iters is not None:
        cmd += ["--iters", str(iters)]
    if rotate is not None:
        cmd += ["--rotate", str(rotate)]
    if l2_fill:
        cmd += ["--l2-fill"]
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
    return [
        nsys,
        "profile",
        "-t",
        "cuda,nvtx",
        "--sample=" + ("cpu" if sample else "none"),
        "--cpuctxsw=" + ("process-tree" if sample else "none"),
        "--force-overwrite",
        "true",
        "-o",
        str(out),
        *cmd,
    ]


def ncu_args(
    ncu: str,
    out: Path,
    cmd: list[str],
    metrics: str = "lean",
    filters=(),
    clock_control: str = "none",
    extra=(),
    source: bool = False,
) -> list[str]:
    """ncu's command line. NVTX recording is always on: ranges cost little and a report without
    them cannot tie a launch to its operator or step. `extra`: the sampling filter. `source`:
    Source Counters (per-instruction samples and stall reasons) with the source files embedded,
    so `profkit hotspots` can name lines on a machine without the program's code."""
    args = [ncu, "--clock-control", clock_control, "--target-processes", "all", "--nvtx", "-f", "-o", str(out)]
    for f in filters:
        args += ["--nvtx-include", f]
    args += list(extra)
    if metrics == "full":
        args += ["--set", "full"]
    else:
        args += ["--metrics", ",".join(dict.fromkeys(metric_names(metrics)))]
    if source:
        # the section's own metrics ride beside the chosen ones; WarpStateStats gives the
        # kernel-wide stall totals the per-line shares are read against
        args += ["--section", "SourceCounters", "--section", "WarpStateStats", "--import-source", "yes"]
    return args + cmd


@dataclass
class Captured:
    run: str
    folder: Path
    files: list[Path] = field(default_factory=list)
    meta: dict = field(default_factory=dict)
    reports: dict = field(default_factory=dict)  # file -> Parsed already parsed here (ingest reuses it)
    facts: dict = field(default_factory=dict)  # file -> facts ingest adds (how ncu sampled)
    failures: list[str] = field(default_factory=list)  # one line per report or step that failed
    program_exit: int | None = None  # the program's exit code where it was not 0
    plan: sampling.Plan | None = None
    tuned_file: Path | None = None  # the plain run's tuned picks, handed to the profiled runs


def run_metadata(cmd: list[str], tools: dict[str, str]) -> dict:
    meta: dict = {
        "command": environment.redact_args(cmd),
        "host": socket.gethostname(),
        "captured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "env": {k: v for k, v in environment.kept_env(launch_env()).items() if k in RESULT_ENV},
    }
    meta.update(environment.gpu())
    v = environment.versions()
    meta.update(python=v.pop("python"), cuda=v.pop("cuda", None), **{f"{k}_version": x for k, x in v.items()})
    for name, exe in tools.items():
        try:
            said = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=60).stdout.strip()
            meta[f"{name}_version"] = said.splitlines()[-1] if said else None
        except (OSError, subprocess.TimeoutExpired):
            pass
    try:
        meta["git_revision"] = (
            subprocess.run(
                ["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10, cwd=Path(__file__).parent
            ).stdout.strip()
            or None
        )
    except OSError:
        pass
    return meta


def _run(args: list[str], progress=None, env=None) -> tuple[int, str]:
    """Run a profiler, streaming its output lines to `progress`; (exit code, output)."""
    lines: list[str] = []
    with subprocess.Popen(
        args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env or launch_env(), errors="replace"
    ) as p:
        for line in p.stdout:  # type: ignore[union-attr]
            lines.append(line.rstrip("\n"))
            if progress:
                progress(line)
        rc = p.wait()
    return rc, "\n".join(lines)


def _tail(text: str, n: int = 3) -> str:
    lines = [l for l in text.splitlines() if l.strip() and not l.startswith(("==PROF==", "==WARNING=="))]
    return " | ".join(lines[-n:])


def _app_exit(text: str) -> int | None:
    """The exit code ncu reports for the program ('The application returned an error code (N)')."""
    m = re.search(r"application returned an error code \((-?\d+)\)", text)
    return int(m.group(1)) if m else None


def _profile(args: list[str], what: str, progress=None) -> str:
    """Run a profiler; stream its output to `progress`; map failures to one clear error."""
    rc, text = _run(args, progress)
    if "ERR_NVGPUCTRPERM" in text:
        raise ToolFailed(PERM_HELP)
    if rc != 0 or "The application returned an error code" in text:
        raise ToolFailed(f"{what}: the workload failed (exit {_app_exit(text) or rc}): " + _tail(text, 5))
    if "No kernels were profiled" in text:
        raise ToolFailed(f"{what}: no kernel matched the NVTX filter")
    return text


# ---- what to run -------------------------------------------------------------------------------
_UNSAFE = re.compile(r"[^A-Za-z0-9._+-]+")


def check_run_name(run: str) -> str:
    """A run name becomes the folder OUT/<run>/: a plain name, never a path."""
    if (
        not run
        or run in (".", "..")
        or any(c in run for c in "/\\\0")
        or os.path.isabs(run)
        or run.startswith("-")
        or run != run.strip()
    ):
        raise BadArgument(
            f"run name {run!r}: use a plain name (letters, digits, '.', '_', '-'; no '/', '..' or "
            "absolute path): it names the folder OUT/<run>/"
        )
    return run


def default_run_name(cmd: list[str]) -> str:
    """A command's run name: its Python script or module, else the program's name."""
    exe = Path(cmd[0]).name
    name = exe
    if exe.startswith("python"):
        i = 1
        while i < len(cmd) and cmd[i].startswith("-") and cmd[i] not in ("-m", "-c"):
            i += 2 if cmd[i] in ("-X", "-W") else 1
        if i + 1 < len(cmd) and cmd[i] == "-m":
            name = cmd[i + 1].rsplit(".", 1)[-1]
        elif i < len(cmd) and cmd[i] != "-c":
            name = Path(cmd[i]).name.removesuffix(".py")
    return _UNSAFE.sub("_", name).strip("._-") or "capture"


def lab_workloads() -> tuple[list[str], str | None]:
    """The kernel lab's workload names, and why the lab cannot run here (None: it can). A core
    install (no `kernels` extra: no torch or triton) still knows the names, from the modules."""
    import pkgutil

    from profkit import kernels  # the package itself imports neither torch nor triton

    try:
        return list(kernels.workloads()), None
    except ImportError as e:
        names = [
            m.name for m in pkgutil.iter_modules(kernels.__path__) if not m.name.startswith("_") and m.name != "run"
        ]
        return sorted(names), str(e)


def resolve_target(target: list[str], ranks: bool = False) -> tuple[str | None, list[str] | None]:
    """(workload, command) for `profkit capture TARGET...`: one word naming a lab workload is the
    workload; anything else is a command, checked before any profiler starts."""
    target = list(target)
    if not target:
        raise BadArgument("nothing to capture: give a lab workload name or -- COMMAND ARGS")
    if ranks:
        return None, target
    workloads: list[str] | None = None
    if len(target) == 1:
        workloads, why = lab_workloads()
        if target[0] in workloads:
            if why:
                raise ToolMissing(
                    f"workload {target[0]!r} needs the kernel lab, which this install lacks ({why}): "
                    "pip install 'profkit[kernels]'"
                )
            return target[0], None
    check_command(target, workloads)
    return None, target


def check_command(cmd: list[str], workloads: list[str] | None = None) -> None:
    exe = cmd[0]
    found = shutil.which(exe) if os.sep not in exe else exe if os.path.isfile(exe) and os.access(exe, os.X_OK) else None
    if found is None:
        if exe.endswith(".py") and os.path.isfile(exe):
            raise BadArgument(
                f"{exe} is a Python script: name its interpreter, e.g. profkit capture -- python3 " + " ".join(cmd)
            )
        if os.path.isfile(exe):
            raise BadArgument(f"{exe}: not executable (chmod +x it, or name its interpreter)")
        if workloads is not None:  # one word: a misspelt workload, or a program that is not there
            close = difflib.get_close_matches(exe, workloads, n=3, cutoff=0.6)
            hint = f" (did you mean {' or '.join(close)}?)" if close else f" (workloads: {', '.join(workloads)})"
            raise BadArgument(
                f"{exe!r} is neither a lab workload nor a program on PATH{hint}; "
                "a program runs as: profkit capture -- COMMAND ARGS"
            )
        raise BadArgument(f"{exe}: no such program (not on PATH, not a file)")
    if Path(exe).name.startswith("python") and len(cmd) == 1:
        raise BadArgument(f"{exe} alone would wait for input: name the program, e.g. profkit capture -- {exe} train.py")


def gpu_problem() -> str | None:
    """Why no NVIDIA GPU can be profiled here, or None when one is there (or it cannot tell)."""
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            p = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            return None
        if p.returncode != 0:
            return "nvidia-smi: " + (_tail(p.stdout + "\n" + p.stderr, 1) or f"exit {p.returncode}")
        if not any(line.startswith("GPU ") for line in p.stdout.splitlines()):
            return "nvidia-smi lists no GPU"
        return None
    if not glob.glob("/dev/nvidia[0-9]*"):
        return "no NVIDIA GPU here (no nvidia-smi, no /dev/nvidia* device)"
    return None


# ---- windows: which part of the program ncu profiles ---------------------------------------------
def range_names(report) -> dict[str, tuple[str | None, str]]:
    """{range text: (domain, kind)} of a parsed timeline."""
    from profkit.core.rows import RANGE_FIELDS

    d, t, k = (RANGE_FIELDS.index(x) for x in ("domain", "text", "kind"))
    out: dict = {}
    for r in report.ranges:
        if r[t] is not None:
            out.setdefault(r[t], (r[d], r[k]))
    return out


def find_step(names, n: int) -> str:
    """The range name of step `n` among a timeline's range names ('step 3', 'iteration_3', ...)."""
    steps = {name: int(m.group(1)) for name in names if (m := STEP_RE.match(name.strip()))}
    hit = sorted(name for name, i in steps.items() if i == n)
    if hit:
        return hit[0]
    if not steps:
        raise BadArgument(
            f"--step {n}: the program marks no steps (no NVTX range named like 'step {n}'); "
            "name a range with --range NAME, or add torch.cuda.nvtx.range(f'step {i}') around each step"
        )
    seen = sorted(steps.values())
    raise BadArgument(
        f"--step {n}: no such step; the program marks steps {seen[0]} to {seen[-1]} "
        f"({len(seen)} ranges like {min(steps, key=lambda s: steps[s])!r})"
    )


def ncu_range_filters(name: str, known: dict | None, torch_ranges: bool = False) -> list[str]:
    """ncu --nvtx-include expressions for 'launched inside range NAME' (push/pop: 'NAME/',
    start/end: 'NAME'; a non-default domain as 'DOMAIN@'). Under --torch-ranges the program's
    own name carries PyTorch's per-call suffix: a regular expression then."""
    domain, kind = (known or {}).get(name, (None, None))
    at = f"{domain}@" if domain else ""
    if torch_ranges:  # record_function ranges: emit_nvtx names them 'NAME, op_id = N' (push/pop)
        return ["regex:" + at + "^" + re.escape(name) + "(, .*)?$/"]
    if kind == "push_pop":
        return [f"{at}{name}/"]
    if kind:
        return [f"{at}{name}"]
    return [f"{at}{name}/", f"{at}{name}"]


def profiler_windows(timeline: Path) -> list[list[int]] | None:
    """[start, stop) of each cudaProfilerStart .. cudaProfilerStop the program called, on the
    timeline's clock; None if it never called cudaProfilerStart."""
    calls: list[tuple[int, str]] = []
    name = timeline.name.lower()
    try:
        if name.endswith((".sqlite", ".db")):
            from profkit.core.dbfile import open_readonly

            conn = open_readonly(timeline)
            try:
                calls = conn.execute(
                    "SELECT r.start, s.value FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId"
                    " WHERE s.value LIKE 'cudaProfilerSt%' ORDER BY r.start"
                ).fetchall()
            finally:
                conn.close()
        elif name.endswith(".jsonl"):
            with open(timeline, encoding="utf-8", errors="replace") as f:
                for line in f:
                    if "ProfilerSt" in line:
                        r = json.loads(line)
                        if r.get("type") in ("runtime", "driver") and "ProfilerSt" in (r.get("name") or ""):
                            calls.append((r["start"], r["name"]))
            calls.sort()
    except (sqlite3.Error, OSError, ValueError, KeyError):
        return None
    out: list[list[Any]] = []  # [start, stop or None while open]
    for t, what in calls:
        if "Start" in what and (not out or out[-1][1] is not None):
            out.append([t, None])
        elif "Stop" in what and out and out[-1][1] is None:
            out[-1][1] = t
    if not out:
        return None
    return [[a, b if b is not None else 2**62] for a, b in out]


def torch_ranges_command(cmd: list[str]) -> list[str]:
    """The command run through profkit/capture/torch_ranges.py (a file: it needs no profkit import)."""
    from profkit.capture import torch_ranges

    if not Path(cmd[0]).name.startswith("python"):
        raise BadArgument(f"--torch-ranges runs a Python program (python3 SCRIPT or python3 -m MODULE), not {cmd[0]!r}")
    i = 1
    while i < len(cmd) and cmd[i].startswith("-") and cmd[i] not in ("-m", "-c"):
        i += 2 if cmd[i] in ("-X", "-W") else 1
    if i >= len(cmd) or cmd[i] == "-c":
        raise BadArgument("--torch-ranges needs a script or -m MODULE to run (not -c CODE)")
    return cmd[:i] + [torch_ranges.__file__] + cmd[i:]


def _check_lab_option(option: str, workload: str | None) -> None:
    """--calls, --rotate and --l2-fill are the lab runner's; refused where they would be ignored
    (a command runs as it runs; an end-to-end workload is a program of its own), never silently
    dropped."""
    if not workload:
        raise BadArgument(f"{option} is for lab workloads: a command (-- COMMAND) runs its kernels as it calls them")
    try:
        from profkit.kernels import get

        own = getattr(get(workload), "main", None) is not None
    except Exception:  # noqa: BLE001 - an unknown workload: the profiled run says what is wrong with it
        return
    if own:
        raise BadArgument(
            f"{option}: the workload {workload!r} is a program of its own, which sets its own calls and inputs"
        )


def _check_calls(workload: str | None, calls: int) -> None:
    _check_lab_option("--calls", workload)
    if not 1 <= calls <= 1000:
        raise BadArgument(f"--calls {calls}: give 1 to 1000 calls a variant")


# ---- the capture ---------------------------------------------------------------------------
def capture(opts: CaptureOptions, hooks: Hooks | None = None) -> Captured:
    """Profile a lab workload or a command: a timeline first (nsys, else the CUPTI tracer), then
    ncu on a sample of the launches (commands) or on the workload's ranges (lab). Never loses a
    capture: a step that fails is recorded in `failures` and the reports written so far stay.
    `hooks` hear of the capture as it goes (ncu's lines, the launches to come, the plan, notes).
    `opts.calls`: profkit compare's band is a bootstrap interval from 10 calls a side
    (docs/compare.md); `rotate`, `l2_fill`: the context a small kernel meets in a model step."""
    hooks = hooks or Hooks()
    workload, command, run = opts.workload, opts.command, opts.run
    if bool(workload) == bool(command):
        raise BadArgument("give either a WORKLOAD name or -- COMMAND, not both")
    if not opts.use_nsys and not opts.use_ncu:
        raise BadArgument("--no-nsys with --no-ncu records nothing: keep one of them")
    check_run_name(run)
    if (opts.range_name or opts.step is not None or opts.torch_ranges) and workload:
        raise BadArgument(
            "--range, --step and --torch-ranges are for commands (-- COMMAND); a lab workload runs in its own ranges"
        )
    if opts.step is not None and not opts.use_nsys:
        raise BadArgument("--step finds the step's range on the timeline: drop --no-nsys")
    if opts.calls is not None:
        _check_calls(workload, opts.calls)
    if opts.rotate is not None:
        _check_lab_option("--rotate", workload)
        if not 1 <= opts.rotate <= 64:
            raise BadArgument(f"--rotate {opts.rotate}: give 1 to 64 input copies")
    if opts.l2_fill:
        _check_lab_option("--l2-fill", workload)
    if why := gpu_problem():
        raise ToolMissing(f"{why}: capture needs an NVIDIA GPU (ingest, classify and analyse do not)")
    out = opts.out
    folder = out / run
    if folder.resolve().parent != out.resolve():
        raise BadArgument(f"run name {run!r} leaves {out}")
    folder.mkdir(parents=True, exist_ok=True)
    # a lab workload checks each variant against its float64 reference after its range
    # closes; the record goes into the run meta as `correctness` (profkit compare reads it)
    checks = folder.resolve() / "correctness.json" if workload else None
    if checks:
        checks.unlink(missing_ok=True)
    cmd = (
        list(command or ())
        if not workload  # exactly one of workload and command is set (checked above)
        else workload_command(
            workload,
            opts.variants,
            opts.shapes,
            check_out=checks,
            iters=opts.calls,
            rotate=opts.rotate,
            l2_fill=opts.l2_fill,
        )
    )
    if opts.torch_ranges:
        cmd = torch_ranges_command(cmd)
    tools: dict[str, str] = {}
    tracer = opts.tracer
    if opts.use_nsys and tracer in ("nsys", "auto"):
        try:
            tools["nsys"] = find_tool("nsys", opts.nsys)
        except ToolMissing:
            if tracer == "nsys":
                raise
            tracer = "cupti"
    elif opts.use_nsys:
        tracer = "cupti"
    if "nsys" in tools:
        tracer = "nsys"
    if opts.use_ncu:
        tools["ncu"] = find_tool("ncu", opts.ncu)
    got = Captured(run, folder, meta=run_metadata(cmd, tools))
    if opts.torch_ranges:
        got.meta["torch_ranges"] = True
    if workload:
        cmd = _tune_first(got, cmd, opts, hooks)
    tl = _Timeline()
    if opts.use_nsys:
        t0 = time.monotonic()
        tl.path = _timeline(got, tracer, tools, cmd, command is not None)
        tl.seconds = time.monotonic() - t0
        got.meta["timeline_seconds"] = round(tl.seconds, 2)
        got.meta["timeline_tracer"] = tracer
    use_ncu = opts.use_ncu
    if tl.path is not None:
        try:  # parsed once: the plan reads it, ingest takes it from got.reports
            from profkit import parsers

            tl.report = parsers.detect(tl.path).parse(tl.path)
            tl.raw_names = range_names(tl.report)  # as the program named them: what ncu's filter sees
            if opts.torch_ranges:
                clean_torch_ranges(tl.report)
            got.reports[tl.path] = tl.report
        except ProfkitError as e:
            if "no CUDA kernels traced" in str(e) or "no kernel" in str(e).lower():
                got.failures.append(f"{tl.path}: the program launched no GPU kernel: nothing to profile")
                got.files.remove(tl.path)
                use_ncu = False
            else:  # ingest will say what is wrong with it; ncu still runs
                hooks.say(f"{tl.path}: {e}")
    if got.program_exit:
        got.failures.append(
            f"the program failed (exit {got.program_exit}) under the {tracer} tracer: "
            "its timeline up to the failure is kept, ncu was not run"
        )
        use_ncu = False
    if use_ncu:
        _counters(got, opts, cmd, tools, tl, hooks)
    if checks and (record := read_correctness(checks)):
        got.meta["correctness"] = record
        checks.unlink()  # kept in capture.json
    if got.tuned_file:
        got.tuned_file.unlink(missing_ok=True)  # kept in capture.json
    if got.failures:
        got.meta["failures"] = got.failures
    if got.program_exit:
        got.meta["program_exit"] = got.program_exit
    (folder / "capture.json").write_text(json.dumps(got.meta, indent=2, default=str) + "\n")
    return got


@dataclass
class _Timeline:
    """The timeline a capture recorded, as the counters pass reads it."""

    path: Path | None = None
    report: object = None  # parsed, None where it could not be read
    raw_names: dict | None = None  # range names as the program wrote them (before --torch-ranges cleaning)
    seconds: float = 0.0  # the program's time under the tracer


def _timeline(got: Captured, tracer: str, tools: dict, cmd: list[str], is_command: bool) -> Path | None:
    """Record the timeline; returns its report (None if none was written: a failure then)."""
    run, folder = got.run, got.folder
    if tracer != "cupti":
        base = folder / run
        rc, text = _run(nsys_args(tools["nsys"], base, cmd))
        rep = Path(str(base) + ".nsys-rep")
        if rc != 0:
            got.program_exit = rc
        if not rep.exists():
            got.failures.append(f"nsys wrote no report ({rep.name} missing; exit {rc}): {_tail(text)}")
            return None
        sqlite = folder / f"{run}.nsys.sqlite"
        rc2, text2 = _run(
            [tools["nsys"], "export", "--type", "sqlite", "--force-overwrite", "true", "-o", str(sqlite), str(rep)]
        )
        if rc2 != 0 or not sqlite.exists():
            got.failures.append(
                f"{rep}: nsys export failed (exit {rc2}): {_tail(text2)}; the .nsys-rep stays and "
                "`profkit ingest` reads it"
            )
            return None
        got.files.append(sqlite)
        return sqlite
    trace = folder / f"{run}.cupti.jsonl"
    env = launch_env()
    inj = env.get("NVTX_INJECTION64_PATH") or _libcupti()
    if not inj:
        raise ToolMissing("CUPTI tracer: no libcupti found for NVTX_INJECTION64_PATH (pip install cupti-python)")
    env["NVTX_INJECTION64_PATH"] = inj
    args = [sys.executable, "-m", "profkit.capture.cupti_tracer", "-o", str(trace), "--"]
    if not is_command:
        args += ["-m", "profkit.kernels.run", *cmd[3:]]
    elif Path(cmd[0]).name.startswith("python"):
        args += cmd[1:]
    else:
        raise BadArgument(f"the CUPTI tracer runs Python programs; {cmd[0]!r} needs nsys (--tracer nsys)")
    p = subprocess.run(args, capture_output=True, text=True, env=env, errors="replace")
    if p.returncode != 0:
        got.program_exit = p.returncode
    if not trace.exists():
        got.failures.append(f"CUPTI tracer wrote no trace (exit {p.returncode}): {_tail(p.stderr)}")
        return None
    got.files.append(trace)
    return trace


def _counters(got: Captured, opts: CaptureOptions, cmd: list[str], tools: dict, tl: _Timeline, hooks: Hooks) -> None:
    """Run ncu: on the lab workload's ranges, or on a sample of the command's launches."""
    filters = nvtx_filters(opts.workload, opts.variants, opts.shapes, opts.include)
    extra: list[str] = []
    spec = None
    sample = opts.sample
    if opts.command:
        names = range_names(tl.report) if tl.report is not None else None
        ranges = []
        by_index = None  # the step as a window of launch indexes (every thread's launches)
        if opts.step is not None:
            if names is None:
                raise BadArgument("--step needs the timeline, which could not be read")
            step_name = find_step(names, opts.step)
            by_index = _step_window(tl, step_name)
            if by_index is None:
                ranges.append(step_name)
            else:
                hooks.say(f"ncu profiles the step by launch index: {by_index.describe()}")
        range_name = opts.range_name
        if range_name:
            if names is not None and range_name not in names:
                close = difflib.get_close_matches(range_name, list(names), n=3, cutoff=0.5)
                hint = (
                    f"; close names: {', '.join(close)}"
                    if close
                    else (
                        f"; names seen: {', '.join(sorted(names)[:8])}"
                        if names
                        else "; the program emits no NVTX range"
                    )
                )
                raise BadArgument(
                    f"--range {range_name!r}: no such NVTX range in the program{hint} (a torch "
                    "record_function range becomes NVTX with --torch-ranges)"
                )
            ranges.append(range_name)
        for r in ranges:
            filters += ncu_range_filters(
                r,
                tl.raw_names if tl.raw_names is not None else names,
                opts.torch_ranges and r not in (tl.raw_names or {}),
            )
        windows = None
        if opts.profiler_api is not False and tl.path is not None:
            windows = profiler_windows(tl.path)
            if windows:
                hooks.say(
                    f"the program calls cudaProfilerStart/Stop: ncu profiles only between them "
                    f"({len(windows)} window{'s' if len(windows) > 1 else ''}; --no-profiler-api to profile all)"
                )
        if opts.profiler_api and not windows:
            raise BadArgument("--profiler-api: the program never called cudaProfilerStart (on the timeline)")
        spec = sampling.Spec(
            per_config=not sample.all_launches and by_index is None,
            samples=sample.samples,
            skip=sample.warmup,
            key=sample.key,
            ranges=ranges or None,
            time=windows,
            launches=None if by_index is None else [by_index.first, by_index.count],
        )
        if tl.report is not None:
            rows = _sampling_rows(tl.report)
            got.plan = sampling.plan(rows, spec, opts.metrics, sample.max_kernels, tl.seconds)
            got.meta["sampling"] = {
                "plan": {k: v for k, v in vars(got.plan).items() if k != "spec"},
                "ncu_filter": spec.as_dict(),
            }
            if hooks.on_plan:
                hooks.on_plan(got.plan)
            if got.plan.profiled == 0:
                got.failures.append(
                    "ncu skipped: no launch of the program falls in the window"
                    + (f" ({', '.join(ranges)})" if ranges else "")
                )
                return
            if hooks.expect:
                hooks.expect(got.plan.profiled)
        elif sample.max_kernels is not None and not sample.all_launches:
            hooks.say("no timeline to plan from: ncu samples every kernel configuration without the --max-kernels cap")
        extra = sampling.ncu_filter_args(spec)
    elif hooks.expect and tl.report is not None:
        n = expected_launches(tl.report, filters)
        if n:
            hooks.expect(n)
    rep = got.folder / f"{got.run}.ncu-rep"
    rep.unlink(missing_ok=True)
    before = len(got.failures)
    t0 = time.monotonic()
    rc, text = _run(
        ncu_args(
            tools["ncu"], got.folder / got.run, cmd, opts.metrics, filters, opts.clock_control, extra, opts.source
        ),
        hooks.progress,
    )
    got.meta["ncu_seconds"] = round(time.monotonic() - t0, 2)
    if "ERR_NVGPUCTRPERM" in text:
        got.failures.append(PERM_HELP)
    code = _app_exit(text)
    if code:
        got.program_exit = got.program_exit or code
        got.failures.append(f"the program failed under ncu (exit {code}): {_tail(text)}")
    elif rc != 0 and "ERR_NVGPUCTRPERM" not in text:
        got.failures.append(f"ncu failed (exit {rc}): {_tail(text)}")
    if "No kernels were profiled" in text:
        got.failures.append(
            "ncu profiled no kernel: "
            + ("no kernel matched the NVTX filter" if filters else "the program launched none under ncu")
        )
    if rep.exists():
        got.files.append(rep)
        if spec is not None:
            got.facts[rep] = {"ncu_filter": spec.as_dict()}
            if opts.torch_ranges:
                try:
                    from profkit.parsers import ncu_rep

                    report = ncu_rep.parse(rep)
                    clean_torch_ranges(report)
                    got.reports[rep] = report
                except ProfkitError:
                    pass  # ingest reports it
    elif len(got.failures) == before:
        got.failures.append(f"ncu wrote no report ({rep.name} missing; exit {rc}): {_tail(text)}")


def _tune_first(got: Captured, cmd: list[str], opts: CaptureOptions, hooks: Hooks) -> list[str]:
    """The lab's tuned launches (kernels/timing.tuned) picked in a plain run, before any profiler:
    under ncu every candidate's timing is the profiler's (seen: a fused RMSNorm + RoPE pick 1.6x
    slower than the plain run's, H100; benchmarks/ledger.csv). The profiled runs get `--tuned-in` (tuned() picks
    and the autotuned kernels' caches, kernels/timing.dump_tuned); the picks go into the run meta
    as `tuned`."""
    if not opts.workload:  # the caller tunes lab workloads only
        return cmd
    try:
        from profkit.kernels import get

        if getattr(get(opts.workload), "main", None) is not None:  # a program of its own (e2e): runs as it is
            return cmd
    except Exception:  # noqa: BLE001 - the profiled run says what is wrong with the workload
        return cmd
    path = got.folder.resolve() / "tuned.json"
    path.unlink(missing_ok=True)
    rc, text = _run(
        workload_command(opts.workload, opts.variants, opts.shapes) + ["--iters", "1", "--tuned-out", str(path)],
        hooks.progress,
    )
    try:
        picks = json.loads(path.read_text()) if rc == 0 else None
    except (OSError, ValueError):
        picks = None
    if picks is None:
        hooks.say(f"the tuning run failed (exit {rc}): the profiled run tunes its own launches: {_tail(text)}")
        return cmd
    got.meta["tuned"] = picks
    if not picks:
        path.unlink(missing_ok=True)
        return cmd
    got.tuned_file = path
    return [*cmd, "--tuned-in", str(path)]


def _step_window(tl: _Timeline, step: str):
    """The step's launch-index window (capture/step_plan.py), from the timeline loaded into a
    scratch store (the store's inherited NVTX paths give autograd's thread its step); None
    where the timeline cannot be loaded there: ncu's NVTX filter then (the launching thread's
    ranges only)."""
    import tempfile

    from profkit.capture.step_plan import step_window
    from profkit.store.ingest import ingest
    from profkit.store.store import Store

    if tl.path is None or tl.report is None:
        return None
    with tempfile.TemporaryDirectory() as d:
        db = str(Path(d) / "plan.db")
        try:
            ingest(db, [tl.path], run="plan", parsed_reports={tl.path: tl.report}, workers=1)
            with Store(db, readonly=True) as s:
                return step_window(s, "plan", step)
        except (ProfkitError, sqlite3.Error, OSError):
            return None


def _sampling_rows(report) -> list[tuple]:
    at = [KERNEL_FIELDS.index(f) for f in sampling.FIELDS]
    return [tuple(k[i] for i in at) for k in report.kernels]


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
