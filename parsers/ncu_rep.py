"""Nsight Compute report (`.ncu-rep`), read through NVIDIA's `ncu_report` module.

Every profiled launch with all its numeric metrics (normalised in profkit.core.units) and its
NVTX state. `.ncu-rep.xz` is accepted: reports over PyTorch kernels embed their module
(~50 MB) and compress ~40x.

The report is read in a child process: on some corrupt reports NVIDIA's reader aborts the
whole process (a failed protobuf CHECK, found by benchmarks/fuzz.py), which must end as one
line of error, not a dead profkit.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import pickle
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

from profkit.core.errors import BadInput, ToolMissing
from profkit.core.nvtx import path_of
from profkit.core.rows import Parsed, count, ncu_kernel_row
from profkit.core.tempfiles import workdir
from profkit.core.units import impossible, normalise
from profkit.core.unpack import unxz

from . import _ncu_framing

FORMAT = "ncu-rep"
SUFFIXES = (".ncu-rep", ".ncu-rep.xz")  # file name endings it reads (lower case)
ROLE = "counters"  # timeline | counters
SOURCE = "ncu"  # the tool whose launches it yields (launch.source)
PREFERENCE = 10  # among parsers of one role, lower is taken first (analyse: one file per role)
SNIFF_ORDER = 20  # lower is asked first: the most specific recognisers first
DESCRIPTION = "Nsight Compute report .ncu-rep[.xz]"
NCU_MAGIC = b"NVR\x00"  # first bytes of every .ncu-rep seen (ncu 2025.3)


def sniff(path: Path, head: bytes) -> bool:
    name = path.name.lower()
    if name.endswith((".ncu-rep", ".ncu-rep.xz")):
        return True
    return head.startswith(NCU_MAGIC)


MISSING = (
    "reading .ncu-rep needs NVIDIA's ncu_report module: pip install ncu-report, or put ncu on PATH "
    "(or set $NCU): every Nsight Compute install ships the module in extras/python"
)
# where Nsight Compute installs live when ncu is not on PATH (the CUDA toolkit's, NVIDIA's packages)
_INSTALLS = ("/usr/local/cuda*/nsight-compute*", "/opt/nvidia/nsight-compute/*", "/usr/local/NVIDIA-Nsight-Compute*")


def have_reader() -> bool:
    """ncu_report importable: the ncu-report package, else the copy every Nsight Compute install
    ships beside ncu (extras/python), found through $NCU, PATH or the usual install folders and
    added to the import path (the reader's child process inherits it)."""
    if importlib.util.find_spec("ncu_report") is not None:
        return True
    import glob

    roots = [
        Path(os.path.realpath(e)).parent
        for e in (os.environ.get("NCU"), shutil.which("ncu"))
        if e and os.path.isfile(e)
    ]
    roots += [Path(p) for pattern in _INSTALLS for p in sorted(glob.glob(pattern), reverse=True)]  # newest first
    for root in roots:
        for extras in (root / "extras" / "python", root.parent / "extras" / "python"):
            if (extras / "ncu_report.py").is_file() or (extras / "ncu_report" / "__init__.py").is_file():
                sys.path.append(str(extras))
                importlib.invalidate_caches()
                return importlib.util.find_spec("ncu_report") is not None
    return False


def _load(path: Path):
    """ncu_report's context for an uncompressed report (in the child process)."""
    try:
        import ncu_report
    except ImportError:
        raise ToolMissing(MISSING) from None
    try:
        return ncu_report.load_report(str(path))
    except Exception as e:  # ncu_report raises plain exceptions for truncated or foreign files
        msg = " ".join(str(e).split()) or type(e).__name__
        raise BadInput(path, f"Nsight Compute could not read the report ({msg})") from None


def nvtx_path(state) -> tuple[str | None, str | None]:
    """(innermost, path): start/end ranges first (they are process-wide windows), then the
    push/pop stack of the default domain, then those of other domains. A report captured
    without `--nvtx` (ncu's default) has no NVTX state: no range."""
    if state is None:
        return None, None
    se: list[str] = []
    pp: list[str] = []
    for d in sorted(state.domains()):
        dom = state.domain_by_id(d)
        se.extend(dom.start_end_ranges())
        pp.extend(dom.push_pop_ranges())
    names = [_text(n) for n in se + pp if n is not None]
    if not names:
        return None, None
    return names[-1], path_of(names)


_ahead: dict = {}  # path -> Future of its reader's answer (prefetch)
_pool = None
_lock = threading.Lock()
_pending = 0  # prefetched reports not read yet
_servers: list = []  # the background readers' processes (one per pool thread), idle or busy
_busy: set = set()  # those reading a report now
_served: dict = {}  # reader process -> reports it answered
_mine = threading.local()


def readers() -> int:
    """Background reader processes: one core fewer than the machine has (the caller, which
    writes what they read, keeps one busy), at least one, at most four. On two cores one
    reader beside the main job beat two (they took a third of its core; measured)."""
    return max(1, min(4, (os.cpu_count() or 2) - 1))


# a reader process reads this many reports, then a fresh one takes over: NVIDIA's reader keeps
# ~15 MB of each report it read (measured on the shipped reports; gc.collect frees none of it)
REPORTS_PER_READER = 8


def prefetch(paths) -> None:
    """Start reading these reports in the background (readers() reader processes), so that
    parse() finds them read: `analyse` reads every counter report while it loads the
    timelines. A report never parsed afterwards only costs its reading. Each background
    thread keeps one reader process for report after report (a Python start and the reader's
    import cost ~0.15 s a report; REPORTS_PER_READER) until the queue is empty; a report that
    kills it is that report's error, and the next report starts a fresh one."""
    global _pool, _pending
    from concurrent.futures import ThreadPoolExecutor

    if not have_reader():
        return
    if _pool is None:
        _pool = ThreadPoolExecutor(max_workers=readers(), thread_name_prefix="ncu-reader")
    todo = {}
    for p in paths:
        key = _key(Path(p))
        if key not in _ahead:
            todo[key] = Path(p)
    with _lock:  # all counted before the first starts: a reader that finishes early finds more to do
        _pending += len(todo)
    for key, p in todo.items():
        _ahead[key] = _pool.submit(_read_ahead, p)


def _read_ahead(path: Path):
    """_read in a pool thread, through the thread's reader process."""
    global _pending
    try:
        return _read(path, _server)
    finally:
        with _lock:
            _pending -= 1
            done = _pending == 0
        if done:  # nothing left to read: no process waits for work that will not come
            _stop_servers()


def _server(path: Path, d: Path):
    """Read one report in this thread's reader process, which unpacks and checks it in the
    scratch folder `d` (_prepare) and reads it: a CompletedProcess as subprocess.run would give
    for a one-report child (stdout: the pickled answer; on a crash returncode and stderr of the
    dead reader)."""
    err = d / "reader.stderr"
    retired = []
    with _lock:
        srv = getattr(_mine, "server", None)
        if srv is not None and (srv not in _servers or srv.poll() is not None):
            srv = None  # stopped while idle, or dead
        elif srv is not None and _served.get(srv, 0) >= REPORTS_PER_READER:
            _servers.remove(srv)
            retired, srv = [srv], None
        if srv is not None:
            _busy.add(srv)
    _close(retired)  # (idle: this thread's own)
    if srv is None:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        with open(err, "wb") as log:  # (what it says before its first request: an import error)
            # -c puts the working directory first on sys.path: dropped (see _read)
            srv = subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    "import sys; sys.path[:] = [p for p in sys.path if p]; "
                    "from profkit.parsers.ncu_rep import _serve; _serve()",
                ],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                cwd=d,
                env=env,
            )
        _mine.server = srv
        with _lock:
            _servers.append(srv)
            _busy.add(srv)
    try:
        try:
            stdin, stdout = srv.stdin, srv.stdout
            assert stdin is not None and stdout is not None  # started with both as pipes
            stdin.write(_frame(pickle.dumps([str(path.resolve()), str(d), str(err)])))
            stdin.flush()
            head = _read_exactly(stdout, 8)
            answer = _read_exactly(stdout, int.from_bytes(head, "big")) if head is not None else None
        except OSError:  # its input closed: it died
            answer = None
        if answer is not None:
            _served[srv] = _served.get(srv, 0) + 1
            return subprocess.CompletedProcess(srv.args, 0, answer, b"")
        code = srv.wait()  # the reader died on this report
        with _lock:
            if srv in _servers:
                _servers.remove(srv)
            _served.pop(srv, None)
        _mine.server = None
        return subprocess.CompletedProcess(srv.args, code, b"", err.read_bytes() if err.is_file() else b"")
    finally:
        with _lock:
            _busy.discard(srv)


def _frame(b: bytes) -> bytes:
    return len(b).to_bytes(8, "big") + b


def _read_exactly(f, n: int) -> bytes | None:
    buf = b""
    while len(buf) < n:
        got = f.read(n - len(buf))
        if not got:
            return None
        buf += got
    return buf


def _stop_servers() -> None:
    """End the idle reader processes (their input closes: they exit)."""
    with _lock:
        idle = [srv for srv in _servers if srv not in _busy]
        _servers[:] = [srv for srv in _servers if srv in _busy]
    _close(idle)


def _close(procs: list) -> None:
    """End reader processes that no thread uses any more (their input closes: they exit)."""
    for srv in procs:
        _served.pop(srv, None)
        try:
            srv.stdin.close()
        except OSError:
            pass
        try:
            srv.wait(timeout=30)
        except subprocess.TimeoutExpired:
            srv.kill()
            srv.wait()


def _key(path: Path):
    st = path.stat()
    return (str(path.resolve()), st.st_size, st.st_mtime_ns)


def parse(path: Path) -> Parsed:
    if not have_reader():
        raise ToolMissing(MISSING)
    ahead = _ahead.pop(_key(path), None)
    proc = ahead.result() if ahead is not None else _read(path)  # (a BadInput raised there re-raises here)
    try:
        kind, *payload = pickle.loads(proc.stdout)
    except Exception:  # no answer: the reader killed its process
        raise BadInput(
            path,
            f"Nsight Compute's reader crashed on this report ({_why(proc)}): corrupt, truncated, "
            "or from an unsupported ncu version",
        ) from None
    if kind == "ok":
        rep = payload[0]
        rep.path = str(path)
        rep.caveat = _ncu_framing.CAVEAT
        return rep
    if kind == "bad":
        raise BadInput(path, payload[0])
    if kind == "missing":
        raise ToolMissing(payload[0])
    raise RuntimeError(f"{path}: reading the report failed:\n{payload[0]}")  # a profkit bug: keep the traceback


def _read(path: Path, reader=None):
    """Run the reader's child process on one report: its CompletedProcess. Raises BadInput for
    a broken or oversized xz stream and for a report cut short (checked before the reader).
    `reader(path, folder)`: a pool thread's reader process unpacks, checks and reads it instead
    (_server), its refusals its answer."""
    with workdir("ncu") as d:
        if reader is not None:  # it decompresses and checks there too (_prepare)
            return reader(path, Path(d))
        src = _prepare(path, Path(d))
        # The child sees the parent's import path and runs in the empty temp folder: run from a
        # checkout, `-c` would put the working directory first, and its profkit/ (which has no
        # parsers/: they ship from the top-level folder) would shadow the installed package.
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        return subprocess.run(
            [sys.executable, "-c", "from profkit.parsers.ncu_rep import _child; _child()", str(src.resolve())],
            capture_output=True,
            cwd=d,
            env=env,
        )


def _prepare(path: Path, d: Path) -> Path:
    """The report to hand NVIDIA's reader: `path`, or a `.xz` unpacked into the scratch folder
    `d`. Raises BadInput for a broken or oversized xz stream and a report cut short."""
    src = path
    if path.name.lower().endswith(".xz"):
        src = d / "report.ncu-rep"
        unxz(path, src)  # bounded: the xz index's size, under a ratio and the free disk space
    # whole or refused: NVIDIA's reader returns the launches before a cut without a word
    cut = _ncu_framing.check(src)
    if cut:
        raise BadInput(path, cut + (" (inside the .xz)" if src is not path else ""))
    return src


def _why(proc: subprocess.CompletedProcess) -> str:
    lines = [x.strip() for x in proc.stderr.decode(errors="replace").splitlines() if x.strip()]
    detail = next((x[x.index("Check failed") :] for x in lines if "Check failed" in x), lines[-1] if lines else "")
    code = f"signal {-proc.returncode}" if proc.returncode < 0 else f"exit {proc.returncode}"
    return f"{code}: {detail[:160]}" if detail else code


def _serve() -> None:
    """A reader process for report after report: each request on stdin is a framed pickle
    [report, folder, stderr file]; it works inside the folder (the caller's scratch folder of
    that report, as _child's), unpacks and checks the report there (_prepare), with whatever
    the reader prints going to the stderr file, and answers as _child does, framed, on the
    original stdout. Ends when stdin closes."""
    out = os.fdopen(os.dup(1), "wb")
    inp = os.fdopen(os.dup(0), "rb")
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    while True:
        head = _read_exactly(inp, 8)
        if head is None:
            return
        body = _read_exactly(inp, int.from_bytes(head, "big"))
        if body is None:
            return
        src, folder, err = pickle.loads(body)
        os.chdir(folder)
        fd = os.open(err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(fd, 2)
        os.dup2(fd, 1)
        os.close(fd)
        out.write(_frame(pickle.dumps(_answer(Path(src), Path(folder)))))
        out.flush()
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(null, 2)
        os.dup2(null, 1)
        os.chdir("/")


def _answer(path: Path, d: Path | None = None) -> tuple:
    """The reader's answer for a report (`d`: unpack and check it there first)."""
    try:
        src = _prepare(path, d) if d is not None else path
        return ("ok", _parse(src, _load(src)))
    except BadInput as e:
        return ("bad", e.problem)
    except ToolMissing as e:
        return ("missing", str(e))
    except Exception:
        import traceback

        return ("error", traceback.format_exc())


def _child() -> None:
    """In the child: read argv[1], answer with a pickled ("ok", Parsed) | ("bad", problem) |
    ("missing", message) | ("error", traceback) on the original stdout."""
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # whatever the reader prints goes to stderr
    pickle.dump(_answer(Path(sys.argv[1])), out)
    out.flush()


def _text(s):
    """ncu_report hands out undecodable bytes of a corrupt report as lone surrogates, which
    SQLite cannot store: they become '?'."""
    if not isinstance(s, str) or s.isascii():  # (ASCII: nothing to replace; most names and units)
        return s
    try:
        s.encode("utf-8")
        return s
    except UnicodeEncodeError:
        return s.encode("utf-8", "replace").decode("utf-8")


def _parse(path: Path, ctx) -> Parsed:
    kernels: list[tuple] = []
    counters: list[tuple] = []
    rules: list[tuple] = []
    sass: list[tuple] = []
    files: dict[str, str] = {}
    facts: dict = {}
    seq = 0
    for ri in range(ctx.num_ranges()):
        rng = ctx.range_by_idx(ri)
        for ai in range(rng.num_actions()):
            a = rng.action_by_idx(ai)
            values = {}
            for name in a.metric_names():
                if not name.isascii() and _text(name) is not name:  # a corrupt name: the reader cannot look it up again
                    continue
                m = a.metric_by_name(name)
                if m is None or not m.has_value() or m.kind() == m.ValueKind_STRING:
                    continue
                try:
                    v = m.as_double()
                except Exception:
                    continue
                if v != v:  # NaN
                    continue
                values[name] = normalise(v, _text(m.unit()))
                why = impossible(*values[name])
                if why:
                    raise BadInput(path, f"launch {seq}: {_text(name)} {why} ({v} {_text(m.unit())})")
            if "gpu__time_duration.sum" not in values and not values:
                continue
            inner, path_ = nvtx_path(a.nvtx_state())
            kernels.append(
                ncu_kernel_row(seq, _text(a.name(a.NameBase_DEMANGLED)), _text(a.name()), inner, path_, values)
            )
            counters.extend((seq, k, u, v) for k, (v, u) in values.items())
            rules.extend((seq,) + r for r in _rules(a))
            per_pc = _sass(a)
            sass.extend((seq,) + r for r in per_pc)
            # the embedded text is read only beside a launch's Source Counters (the source_lines
            # view), and asking for it costs ~40 ms a launch on a report that embeds a large module
            for name, text in (_embedded(a) if per_pc else {}).items():
                files.setdefault(name, text)
            if not facts:
                dn = a.metric_by_name("device__attribute_display_name")
                sms = values.get("device__attribute_multiprocessor_count")
                major = values.get("device__attribute_compute_capability_major")
                minor = values.get("device__attribute_compute_capability_minor")
                facts = {
                    "gpu_name": _text(dn.as_string()) if dn is not None else None,
                    "sm_count": sms and count(sms[0]),
                    "compute_capability": f"{major[0]:.0f}.{minor[0]:.0f}" if major and minor else None,
                }
            seq += 1
    if not kernels:
        raise BadInput(path, "the report holds no profiled kernel (truncated or empty?)")
    lines = [(name, i, _text(t)) for name, text in files.items() for i, t in enumerate(text.splitlines(), 1)]
    return Parsed(
        str(path),
        FORMAT,
        SOURCE,
        kernels,
        [],
        counters,
        {k: v for k, v in facts.items() if v},
        rules,
        sass=sass,
        source_lines=lines,
    )


# Source Counters (ncu --section SourceCounters): per-PC instances of these metrics, the PCs
# their correlation ids. A report without the section has none of them per PC.
INST_EXECUTED = "inst_executed"
SAMPLES = "smsp__pcsamp_sample_count"
STALL_PREFIX = "smsp__pcsamp_warps_issue_stalled_"
NOT_ISSUED = "_not_issued"


def _per_pc(metric) -> dict[int, int]:
    """{pc: value} of an instanced, source-correlated metric ({} for one that is not)."""
    if metric is None or not metric.has_correlation_ids():
        return {}
    ids = metric.correlation_ids()
    n = metric.num_instances()
    if ids is None or ids.num_instances() != n:
        return {}
    return {ids.as_uint64(i): metric.as_uint64(i) for i in range(n)}


def _sass(action) -> list[tuple]:
    """The kernel's instructions with Source Counters (SASS_FIELDS less seq), in PC order; []
    when the report has no per-PC counters for it. The stall reasons are the report's own
    metrics (smsp__pcsamp_warps_issue_stalled_REASON), whichever the GPU and ncu version have."""
    executed = _per_pc(action.metric_by_name(INST_EXECUTED))
    samples = _per_pc(action.metric_by_name(SAMPLES))
    if not executed and not samples:
        return []
    stalls: dict[str, dict[int, int]] = {}
    quiet: dict[str, dict[int, int]] = {}
    for name in action.metric_names():
        if name.startswith(STALL_PREFIX):
            reason = name[len(STALL_PREFIX) :]
            if reason.endswith(NOT_ISSUED):
                quiet[reason[: -len(NOT_ISSUED)]] = _per_pc(action.metric_by_name(name))
            else:
                stalls[reason] = _per_pc(action.metric_by_name(name))
    pcs = _every_pc(action, sorted(set(executed) | set(samples) | {pc for v in stalls.values() for pc in v}))
    if not pcs:
        return []
    base = pcs[0]
    out = []
    for pc in pcs:
        info = action.source_info(pc)
        file, line = (_text(info.file_name()) or None, info.line()) if info is not None else (None, None)
        sass = action.sass_by_pc(pc)
        by = {r: v[pc] for r, v in stalls.items() if v.get(pc)}
        by_quiet = {r: v[pc] for r, v in quiet.items() if v.get(pc)}
        out.append(
            (
                pc - base,
                pc,
                _text(" ".join(sass.split())) if sass else None,
                file,
                line or None,
                executed.get(pc, 0 if executed else None),
                samples.get(pc, 0 if samples else None),
                sum(by_quiet.values()) if quiet else None,
                json.dumps(dict(sorted(by.items(), key=lambda x: -x[1]))),
                json.dumps(dict(sorted(by_quiet.items(), key=lambda x: -x[1]))),
            )
        )
    return out


TRAILING = 256  # instructions read past the last counted one (the exit's branch-to-self, padding)


def _every_pc(action, counted: list[int]) -> list[int]:
    """The function's instructions from its first counted PC: the counted ones and those the
    counters skip (never executed, never sampled: a branch not taken, the padding after the
    exit), as ncu's source page lists them. The step is the instruction size: 16 bytes from Volta
    on, 8 before (what the counted PCs' spacing allows of it)."""
    if len(counted) < 2:
        return counted
    step = 16  # (sparse counted PCs, 0x0 and 0x40, say, must not step over the ones between)
    for a, b in zip(counted, counted[1:]):
        step = math.gcd(step, b - a)
    if step < 8:  # not whole instructions: keep what the counters name
        return counted
    have = set(counted)
    out = [pc for pc in range(counted[0], counted[-1] + step, step) if pc in have or action.sass_by_pc(pc)]
    pc = counted[-1] + step
    while pc <= counted[-1] + TRAILING * step and action.sass_by_pc(pc):
        out.append(pc)
        pc += step
    return out


def _embedded(action) -> dict[str, str]:
    """{file: text} of the source files the report embeds for this kernel (--import-source yes)."""
    try:
        got = action.source_files()
    except Exception:  # an older reader without it, or a report it cannot decode: no text
        return {}
    return {_text(k): _text(v) for k, v in dict(got or {}).items() if v}


# ncu_report's MsgType and SpeedupType, as ncu's CLI and CSV pages print them
# keyed by whatever the report's decoded rule results hold: any other value looks up None
_SEVERITY: dict[object, str] = {1: "INF", 2: "OPT", 3: "WRN", 4: "ERR"}
_SPEEDUP_TYPE: dict[object, str] = {1: "local", 2: "global"}
# links in rule messages: @section:MemoryWorkloadAnalysis:Memory Workload Analysis@, @url:Text:https://...@
_MARKUP = re.compile(r"@(\w+):([^@]*)@")


def rule_text(message: str) -> str:
    """A rule message as ncu's CSV pages print it: links resolved to their text."""

    def one(m):
        kind, rest = m.group(1), m.group(2)
        head, _, tail = rest.partition(":")
        if kind == "url":
            return f"{head} ({tail})" if tail else head
        return tail or head

    return _MARKUP.sub(one, message)


def _rules(action) -> list[tuple]:
    """ncu's guided-analysis results stored in the report (ncu applies its rules while it
    profiles, the default): (section, rule, severity, message, speedup type, speedup %)."""
    try:
        found = action.rule_results_as_dicts() if hasattr(action, "rule_results_as_dicts") else ()
    except Exception:  # a report whose rule results the reader cannot decode: counters still load
        return []
    out = []
    for r in found or ():
        msg = r.get("rule_message") or {}
        text = _text(rule_text(str(msg.get("message") or "")))
        if not text:
            continue
        est = r.get("speedup_estimation") or {}
        pct = est.get("speedup")
        pct = float(pct) if isinstance(pct, (int, float)) and pct == pct and 0 <= pct <= 100 else None
        out.append(
            (
                _text(r.get("section_identifier")) or None,
                _text(r.get("rule_identifier")) or "?",
                _SEVERITY.get(msg.get("type")),
                text,
                _SPEEDUP_TYPE.get(est.get("type")) if pct is not None else None,
                pct,
            )
        )
    return out
