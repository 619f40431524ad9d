"""torch.profiler (Kineto) chrome traces: `prof.export_chrome_trace(...)` and the files of
`torch.profiler.tensorboard_trace_handler` (`*.pt.trace.json[.gz]`), what HolisticTraceAnalysis
and TraceLens read.

- Kernels: `cat` "kernel" ("Kernel" in traces before torch 1.10), with `args` grid, block,
  registers per thread, stream, device and correlation. Kineto writes names demangled.
  `args["shared memory"]` is static + dynamic together, so neither launch column gets it.
- Launch calls: `cuda_runtime` (cudaLaunchKernel, hipLaunchKernel; "Runtime" before 1.10) and
  `cuda_driver` (cuLaunchKernel, cuLaunchKernelEx: Triton and cuBLAS launch this way) events
  with the kernel's `args.correlation`.
- Ranges: `user_annotation` events (the CPU side of `record_function`: the program's own and
  PyTorch's, ProfilerStep#N, Optimizer.step#AdamW.step), nested per (pid, tid) like NVTX push/pop; a kernel belongs to the ranges that hold its launch call
  on the launching thread (profkit.core.nvtx.project), as with nsys and NVTX. `gpu_user_annotation`
  spans are Kineto's GPU-side copies of the same ranges and are not ranges of their own.
  `cpu_op` events (aten::mm, ...) are not ranges by default: nsys shows them only under
  `emit_nvtx`, and an nsys capture of the same program must give the same kernels per range.
  `parse(path, cpu_ops=True)` adds them, in domain "cpu_op".
- Operators with shapes (`record_shapes`: "Input Dims", "Input type", "Input Strides", "Concrete
  Inputs"; `with_flops`: "flops") become op rows tied to the kernels they launched (the innermost
  such cpu_op holding the kernel's launch call: parsers/_ops.py), whatever `cpu_ops` says;
  `record_param_comms` (a collective: "Collective name", "In msg nelems", "dtype", "Group size")
  becomes an op `nccl:<collective>`; `torch::autograd::AccumulateGrad` (a gradient's size, which
  is its parameter's) becomes an op with no kernels, so an optimizer's tensor lists, which the
  trace writes as `[]` past 30 tensors, have sizes. A malformed op is skipped, never a reason to
  refuse the file.
- Memcpy / memset (`gpu_memcpy`, `gpu_memset`) are not kernels: their counts, bytes and time
  are in the file's facts (`kineto`).
- Facts: GPU from `deviceProperties` (the device the kernels ran on), rank and world size from
  `distributedInfo` (rank only for a multi-process job, as for nsys).

Times are microseconds with ns decimals (4539407906150.204): read as decimals, never as
floats, and made integer ns by profkit.core.units.us_to_ns. The file is read as a stream (events
one at a time), so memory holds the rows, not the JSON. A file that does not end where its
JSON does (cut, bad gzip) is refused whole.
"""

from __future__ import annotations

import gzip
import json
import re
import zlib
from collections import Counter
from decimal import Decimal
from pathlib import Path
from typing import Any, TypeGuard

from profkit.core.errors import BadInput
from profkit.core.hostcalls import call_name, host_kind
from profkit.core.names import demangle, short_name
from profkit.core.nvtx import project, range_paths
from profkit.core.rows import SHARED_ID, Parsed, storable_text
from profkit.core.units import us_to_ns
from profkit.core.unpack import open_gzip

from ._ops import GRAD_OP, launching_ops

FORMAT = "kineto-trace"
SUFFIXES = (".pt.trace.json.gz", ".pt.trace.json", ".json.gz", ".json")  # file name endings it reads
ROLE = "timeline"  # timeline | counters
SOURCE = "kineto"  # the tool whose launches it yields (launch.source)
PREFERENCE = 40  # after nsys (10) and the CUPTI tracer (30): a run with several keeps theirs
SNIFF_ORDER = 45  # lower is asked first: the most specific recognisers first
DESCRIPTION = "torch.profiler (Kineto) trace (.json, .json.gz)"

_GZIP = b"\x1f\x8b"
# keys only Kineto writes at the top of a trace (the first 4 KB may end inside a long
# deviceProperties or distributedInfo, before traceEvents), or, for a file that starts with
# traceEvents, what only Kineto's events hold: other JSON, other Chrome traces are not claimed
_HEADER = (b'"deviceProperties"', b'"distributedInfo"')
_EVENT_MARK = re.compile(
    rb'"cat"\s*:\s*"(cpu_op|user_annotation|kernel|cuda_runtime|cuda_driver|gpu_memcpy|gpu_memset|'
    rb'python_function|Kernel|Runtime|Operator|Memcpy|Memset)"|"External id"|PyTorch Profiler'
)
_CHUNK = 1 << 20
_WS = re.compile(r"[ \t\n\r]*")
_SEP = re.compile(r"[ \t\n\r]*([,\]])[ \t\n\r]*")  # between two events, or after the last
_I64 = 1 << 63

# event category -> what it is (older traces: Kernel, Runtime, Memcpy, Memset)
_KERNEL, _CALL, _DRIVER, _RANGE, _OP, _MEMCPY, _MEMSET, _GPU_RANGE = range(8)
_CATS = {
    "kernel": _KERNEL,
    "Kernel": _KERNEL,
    "cuda_runtime": _CALL,
    "Runtime": _CALL,
    "cuda_driver": _DRIVER,
    "user_annotation": _RANGE,
    "cpu_op": _OP,
    "Operator": _OP,
    "gpu_memcpy": _MEMCPY,
    "Memcpy": _MEMCPY,
    "gpu_memset": _MEMSET,
    "Memset": _MEMSET,
    "gpu_user_annotation": _GPU_RANGE,
}


def sniff(path: Path, head: bytes) -> bool:
    if head.startswith(_GZIP):
        # a gzip file too short or broken to show its start: ours to reject if its name says
        # it is a trace (a cut .json.gz gets "truncated", not "unrecognised")
        ours = str(path).lower().endswith(".json.gz")
        z = zlib.decompressobj(31)
        try:
            head = z.decompress(head, 1 << 16)
        except zlib.error:
            return ours
        if not z.eof and len(head.strip()) < 64:
            return ours
    head = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if not head.startswith(b"{"):
        return False
    if _marked(head):
        return True
    # a .json a tool rewrote with its own keys first (TraceLens puts a 26 KB "metadata" object
    # before traceEvents): look further into it, a bounded read
    if str(path).lower().endswith((".json", ".json.gz")):
        try:
            with _open_bytes(path) as f:
                return _marked(f.read(_DEEP_SNIFF))
        except (OSError, EOFError, zlib.error):
            return False
    return False


_DEEP_SNIFF = 1 << 18


def _marked(text: bytes) -> bool:
    return any(m in text for m in _HEADER) or (b'"traceEvents"' in text and _EVENT_MARK.search(text) is not None)


def _open_bytes(path: Path):
    with open(path, "rb") as f:
        gz = f.read(2) == _GZIP
    return gzip.open(path, "rb") if gz else open(path, "rb")


class _Refused(Exception):
    """Why the stream cannot be read; parse() names the file and where."""


def _no_constant(name: str):
    raise _Refused(f"{name} is not a JSON number")


_DECODER = json.JSONDecoder(parse_float=Decimal, parse_constant=_no_constant)


class _Stream:
    """A JSON text read a value at a time (raw_decode over a sliding buffer)."""

    def __init__(self, f):
        self.f, self.buf, self.i, self.eof, self.done = f, "", 0, False, 0

    def _fill(self, want: int = 0) -> bool:
        if self.eof:
            return False
        chunk = self.f.read(max(want, _CHUNK))
        if not chunk:
            self.eof = True
            return False
        self.done += self.i
        self.buf = self.buf[self.i :] + chunk
        self.i = 0
        return True

    def peek(self) -> str | None:
        """The next character that is not whitespace (not taken), None at the end."""
        while True:
            ws = _WS.match(self.buf, self.i)
            assert ws is not None  # [ \t\n\r]* matches the empty string too
            self.i = ws.end()
            if self.i < len(self.buf):
                return self.buf[self.i]
            if not self._fill():
                return None

    def take(self, ch: str, where: str) -> None:
        got = self.peek()
        if got != ch:
            raise _Refused(self._ended(where) if got is None else f"expected {ch!r} {where}, found {got!r}")
        self.i += 1

    def value(self, where: str):
        if self.peek() is None:
            raise _Refused(self._ended(where))
        while True:
            try:
                v, end = _DECODER.raw_decode(self.buf, self.i)
            except json.JSONDecodeError as e:
                # a value cut by the buffer's end (not the file's) reads on; anything else is bad
                cut = e.pos >= len(self.buf) - 8 or e.msg.startswith("Unterminated string")
                if cut and self._fill(len(self.buf) - self.i):
                    continue
                if cut and self.eof:
                    raise _Refused(self._ended(where)) from None
                raise _Refused(f"not JSON at character {self.done + e.pos} ({e.msg}) {where}") from None
            if end >= len(self.buf) and self._fill():
                continue  # a number at the buffer's end may go on
            self.i = end
            return v

    def _ended(self, where: str) -> str:
        return f"the file ends {where}: is the trace truncated?"


def _open(path: Path):
    with open(path, "rb") as f:
        gz = f.read(2) == _GZIP
    if gz:  # (read as a stream, never unpacked to disk; a bomb stops at 1000x: profkit.core.unpack)
        return open_gzip(path, text=True, encoding="utf-8-sig", newline="")
    return open(path, encoding="utf-8-sig", newline="")


_COPY_NAME = re.compile(r"Memcpy (\w+)")  # a gpu_memcpy event's direction


def parse(path: Path, *, cpu_ops: bool = False) -> Parsed:
    path = Path(path)
    t = _Trace(cpu_ops)
    try:
        with _open(path) as f:
            t.read(_Stream(f))
    except _Refused as e:
        raise BadInput(path, str(e)) from None
    except UnicodeDecodeError as e:
        raise BadInput(path, f"not UTF-8 text ({e.reason})") from None
    except (EOFError, zlib.error, gzip.BadGzipFile) as e:
        raise BadInput(path, f"not a whole gzip stream ({e}): is the file truncated or corrupt?") from None
    except RecursionError:
        raise BadInput(path, "JSON nested too deeply to be a trace") from None
    except ValueError as e:  # an integer of thousands of digits
        raise BadInput(path, f"unreadable JSON ({str(e)[:80]})") from None
    return t.result(path)


def _int(v) -> TypeGuard[int]:
    return type(v) is int and -_I64 <= v < _I64  # what an SQLite INTEGER holds (bool is no count)


def _id(v) -> bool:
    return _int(v) or type(v) is str  # pid / tid: Kineto writes numbers, some writers text


def _dim3(v) -> bool:
    return isinstance(v, list) and len(v) == 3 and all(_int(x) for x in v)


class _Trace:
    """What one pass over the events keeps: rows as tuples, names shared (one str per name)."""

    def __init__(self, cpu_ops: bool):
        self.cpu_ops = cpu_ops
        self.top: dict = {}
        self.kernels: list[tuple] = []  # (start, end, name, correlation, args)
        self.calls: dict = {}  # correlation -> (name, start, end, pid, tid, is_runtime)
        self.ranges: list[tuple] = []  # (domain, text, kind, start, end, pid, tid)
        self.names: dict[str, str] = {}
        self.n_events = 0
        self.other: Counter[int] = Counter()  # gpu_user_annotation, cpu_op, ... seen and not kept
        self.cats: Counter[str] = Counter()  # events by category, for the message of a trace without kernels
        self.copies = {_MEMCPY: [0, 0, 0], _MEMSET: [0, 0, 0]}  # count, bytes, ns
        self.ops: list[tuple] = []  # (name, start, end, pid, tid, dims, types, strides, concrete, flops)
        self.host_calls: list[tuple] = []  # rows.HOST_CALL_FIELDS: the idle causes' calls
        self.gpu_copies: list[tuple] = []  # rows.GPU_COPY_FIELDS

    # --- reading -----------------------------------------------------------------------------
    def read(self, s: _Stream) -> None:
        s.take("{", "at its start (a torch.profiler trace is one JSON object)")
        seen_events = False
        if s.peek() == "}":
            s.i += 1
        else:
            while True:
                key = s.value("in the trace's header")
                if type(key) is not str:
                    raise _Refused("a key of the trace object is not a string")
                s.take(":", f"after key {key[:40]!r}")
                if key == "traceEvents":
                    if seen_events:
                        raise _Refused("two traceEvents arrays")
                    seen_events = True
                    self._events(s)
                else:
                    self.top[key] = s.value(f"in {key[:40]!r}")
                c = s.peek()
                if c == ",":
                    s.i += 1
                    continue
                if c == "}":
                    s.i += 1
                    break
                raise _Refused(
                    s._ended("after the trace's last key")
                    if c is None
                    else f"expected ',' or '}}' after {key[:40]!r}, found {c!r}"
                )
        if s.peek() is not None:
            raise _Refused("more text after the trace's closing '}'")
        if not seen_events:
            raise _Refused("a JSON object without traceEvents: not a torch.profiler trace")

    def _events(self, s: _Stream) -> None:
        s.take("[", "at the start of traceEvents")
        if s.peek() == "]":
            s.i += 1
            return
        n, scan, sep_re, cats, other = 0, _DECODER.scan_once, _SEP, self.cats, self.other  # type: ignore[attr-defined]  # set by JSONDecoder.__init__, not in its stubs
        while True:
            # fast path: the event and the separator after it lie whole inside the buffer
            buf, i, sep = s.buf, s.i, None
            try:
                e, end = scan(buf, i)
                m = sep_re.match(buf, end)
                if m is not None and m.end() < len(buf):
                    s.i, sep = m.end(), m.group(1)
            except (StopIteration, json.JSONDecodeError):
                pass
            if sep is None:  # the slow path reads on, or says what is wrong
                where = f"in traceEvents, after {n} events"
                e = s.value(where)
                sep = s.peek()
                if sep not in (",", "]"):
                    raise _Refused(s._ended(where) if sep is None else f"expected ',' or ']' {where}, found {sep!r}")
                s.i += 1
                if sep == ",":
                    s.peek()
            n += 1
            if type(e) is not dict:
                raise _Refused(f"traceEvents[{n - 1}] is not an event object")
            cat = e.get("cat")
            if type(cat) is str:
                cats[cat] += 1
                kind = _CATS.get(cat) if e.get("ph") == "X" else None
                if kind == _OP:
                    self._op(e)
                if kind == _GPU_RANGE or (kind == _OP and not self.cpu_ops):
                    other[kind] += 1  # counted, not read: an odd one cannot refuse the file
                elif kind is not None:
                    self._event(kind, e, n - 1)
            if sep == "]":
                self.n_events = n
                return

    def _event(self, kind: int, e: dict, n: int) -> None:
        name = e.get("name")
        if not isinstance(name, str) or not storable_text(name):
            raise _Refused(f"traceEvents[{n}] ({e.get('cat')}): its name is not text")
        start, dur = us_to_ns(e.get("ts")), us_to_ns(e.get("dur"))
        if start is None or dur is None or not _int(start) or not _int(start + dur) or dur < 0:
            raise _Refused(
                f"traceEvents[{n}] {name[:60]!r}: ts/dur {str(e.get('ts'))[:30]}/{str(e.get('dur'))[:30]}"
                " is not a time in microseconds"
            )
        args = e.get("args")
        if args is None:
            args = {}
        elif type(args) is not dict:
            raise _Refused(f"traceEvents[{n}] {name[:60]!r}: args is not an object")
        name = self.names.setdefault(name, name)
        if kind == _KERNEL:
            corr = args.get("correlation")
            if corr is not None and not _int(corr):
                raise _Refused(f"traceEvents[{n}] kernel {name[:60]!r}: correlation {str(corr)[:30]} is not an integer")
            for k in ("stream", "device", "registers per thread"):
                v = args.get(k)
                if v is not None and not _int(v):
                    raise _Refused(f"traceEvents[{n}] kernel {name[:60]!r}: {k} {str(v)[:30]} is not an integer")
            for k in ("grid", "block"):
                v = args.get(k)
                if v is not None and not _dim3(v):
                    raise _Refused(f"traceEvents[{n}] kernel {name[:60]!r}: {k} is not 3 integers")
            g, b = args.get("grid") or (None,) * 3, args.get("block") or (None,) * 3
            self.kernels.append(
                (
                    start,
                    start + dur,
                    name,
                    corr,
                    g[0],
                    g[1],
                    g[2],
                    b[0],
                    b[1],
                    b[2],
                    args.get("registers per thread"),
                    args.get("stream"),
                    args.get("device"),
                )
            )
        elif kind in (_CALL, _DRIVER):
            corr, pid, tid = args.get("correlation"), e.get("pid"), e.get("tid")
            held = host_kind(call_name(name))
            if held and _id(pid) and _id(tid):
                self.host_calls.append((held, call_name(name), start, start + dur, pid, tid))
            if corr is None:
                return  # a runtime call CUPTI gave no correlation launches nothing we can tie
            if not _int(corr) or not _id(pid) or not _id(tid):
                raise _Refused(f"traceEvents[{n}] {name[:60]!r}: correlation, pid or tid is not an integer")
            old = self.calls.get(corr)
            if old is not None and old[5] == (kind == _CALL):
                raise _Refused(f"traceEvents[{n}] {name[:60]!r}: {SHARED_ID} {corr} (one per kernel: corrupt)")
            if old is None or kind == _CALL:  # the runtime call wraps a driver one of the same id
                self.calls[corr] = (name, start, start + dur, pid, tid, kind == _CALL)
        elif kind == _RANGE or (kind == _OP and self.cpu_ops):
            pid, tid = e.get("pid"), e.get("tid")
            if not _id(pid) or not _id(tid):
                raise _Refused(f"traceEvents[{n}] range {name[:60]!r}: pid or tid is not an integer")
            self.ranges.append((None if kind == _RANGE else "cpu_op", name, "push_pop", start, start + dur, pid, tid))
        elif kind in (_MEMCPY, _MEMSET):
            c = self.copies[kind]
            c[0] += 1
            c[2] += dur
            nbytes = args.get("bytes")
            if _int(nbytes) and nbytes > 0:
                c[1] += nbytes
            # "Memcpy HtoD (Pageable -> Device)", "Memset (Device)"
            m = _COPY_NAME.match(name)
            stream = args.get("stream")
            pageable = "Pageable" in name
            if kind == _MEMCPY:
                direction = m.group(1) if m else "unknown"
            else:
                direction = "host" if pageable else "device"
            self.gpu_copies.append(
                (
                    "memcpy" if kind == _MEMCPY else "memset",
                    direction,
                    nbytes if _int(nbytes) else None,
                    int(pageable),
                    start,
                    start + dur,
                    stream if _int(stream) else None,
                )
            )

    def _op(self, e: dict) -> None:
        """An operator with recorded shapes (or a collective's record_param_comms), kept leniently."""
        args = e.get("args")
        if type(args) is not dict:
            return
        name = e.get("name")
        dims = args.get("Input Dims")
        types: Any  # as the trace wrote them: stored as JSON, unchecked
        conc: Any
        if name == "record_param_comms" and args.get("Collective name"):
            coll = args.get("Collective name")
            n, dt, g = args.get("In msg nelems"), args.get("dtype"), args.get("Group size")
            if not (_int(n) and storable_text(coll)):
                return
            name, dims, types, conc = f"nccl:{coll}", [[n]], [dt if storable_text(dt) else ""], ["", str(g)]
        elif isinstance(dims, list) and isinstance(name, str) and storable_text(name):
            types, conc = args.get("Input type"), args.get("Concrete Inputs")
        else:
            return
        start, dur = us_to_ns(e.get("ts")), us_to_ns(e.get("dur"))
        pid, tid = e.get("pid"), e.get("tid")
        if start is None or dur is None or not _int(start) or dur < 0 or not _id(pid) or not _id(tid):
            return
        fl = args.get("flops")
        self.ops.append(
            (
                self.names.setdefault(name, name),
                start,
                start + dur,
                pid,
                tid,
                dims,
                types,
                args.get("Input Strides"),
                conc,
                fl if _int(fl) else None,
            )
        )

    def _op_rows(self) -> list[tuple]:
        """OP_FIELDS rows: the ops that launched kernels (self.kernels sorted, seq = index)."""
        if not self.ops:
            return []
        calls = []
        for i, k in enumerate(self.kernels):
            c = self.calls.get(k[3])
            if c is not None:
                calls.append((i, c[1], c[3], c[4]))
        owner = launching_ops([(o[1], o[2], o[3], o[4]) for o in self.ops], calls)
        launched: dict[int, list[int]] = {}
        for seq, op in owner.items():
            launched.setdefault(op, []).append(seq)
        # a gradient autograd accumulates into a parameter launches nothing of its own, but its
        # size is the parameter's: the sizes of an optimizer's lists, which the trace leaves out
        grads = {i for i, o in enumerate(self.ops) if o[0] == GRAD_OP}
        rows = []
        for i in sorted(set(launched) | grads):
            o = self.ops[i]
            rows.append(
                (
                    o[0],
                    o[1],
                    o[2],
                    o[3],
                    o[4],
                    _js(o[5]),
                    _js(o[6]),
                    _js(o[7]),
                    _js(o[8]),
                    o[9],
                    sorted(launched.get(i, ())),
                    "record_shapes",
                    None,
                    None,
                )
            )
        return rows

    # --- rows ----------------------------------------------------------------------------------
    def result(self, path: Path) -> Parsed:
        if not self.kernels:
            most = ", ".join(f"{c[:40]} {n}" for c, n in self.cats.most_common(4))
            # device activity of some kind (cuda_runtime, gpu_memcpy, mtia_runtime): no hint then
            gpu = any(w in c.lower() for c in self.cats for w in ("runtime", "driver", "gpu_"))
            raise BadInput(
                path,
                f"no GPU kernel among its {self.n_events} events"
                + (f" ({most})" if most else "")
                + ("" if gpu else ": captured without ProfilerActivity.CUDA?"),
            )
        self.kernels.sort(key=lambda k: (k[0], k[3] if k[3] is not None else -1))
        calls = self.calls
        proj_calls = []
        for i, k in enumerate(self.kernels):
            c = calls.get(k[3])
            if c is not None:
                proj_calls.append((i, c[3], c[4], c[1]))
        proj = project(self.ranges, proj_calls)
        short: dict[str, tuple[str, str]] = {}
        rows: list[tuple] = []
        apis: Counter[str] = Counter()
        devices: Counter[int | None] = Counter()
        for i, k in enumerate(self.kernels):
            c = calls.get(k[3])
            rng, rpath = proj.get(i, (None, None))
            names = short.get(k[2])
            if names is None:
                full = demangle(k[2])
                names = short[k[2]] = (full, short_name(full))
            if c is not None:
                apis[c[0]] += 1
            devices[k[12]] += 1
            rows.append(
                (
                    i,
                    names[0],
                    names[1],
                    rng,
                    rpath,
                    k[0],
                    k[1],
                    k[1] - k[0],
                    k[4],
                    k[5],
                    k[6],
                    k[7],
                    k[8],
                    k[9],
                    k[10],
                    None,
                    None,
                    k[11],
                    k[12],
                    k[3],
                    c[0] if c else None,
                    c[1] if c else None,
                    c[2] if c else None,
                    c[3] if c else None,
                    c[4] if c else None,
                )
            )
        paths = range_paths(self.ranges)
        range_rows = [r + dp for r, dp in zip(self.ranges, paths)]
        device = max(devices, key=lambda d: (devices[d], d is not None)) if devices else None
        kin = {
            "events": self.n_events,
            "launch_apis": dict(apis),
            "kernels_without_launch_call": len(rows) - sum(apis.values()),
            "memcpy": dict(zip(("count", "bytes", "duration_ns"), self.copies[_MEMCPY])),
            "memset": dict(zip(("count", "bytes", "duration_ns"), self.copies[_MEMSET])),
            "gpu_user_annotations": self.other[_GPU_RANGE],
            "cpu_ops_as_ranges": self.cpu_ops,
        }
        for src, key in (
            ("schemaVersion", "schema_version"),
            ("baseTimeNanoseconds", "base_time_ns"),
            ("cuda_runtime_version", "cuda_runtime_version"),
            ("cuda_driver_version", "cuda_driver_version"),
            ("cupti_version", "cupti_version"),
        ):
            if _int(self.top.get(src)):
                kin[key] = self.top[src]
        facts = {
            "kineto": kin,
            **_device_facts(self.top.get("deviceProperties"), device),
            **_dist_facts(self.top.get("distributedInfo")),
        }
        if len(devices) > 1:
            facts["devices"] = sorted(d for d in devices if d is not None)
        ops = self._op_rows()
        if ops:
            kin["ops_with_shapes"] = len(ops)
        out = Parsed(str(path), FORMAT, SOURCE, rows, range_rows, [], facts, ops=ops)
        out.host_calls = sorted(self.host_calls, key=lambda h: h[2])
        out.gpu_copies = sorted(self.gpu_copies, key=lambda g: g[4])
        return out


def _js(v) -> str | None:
    return None if v is None else json.dumps(v, separators=(",", ":"))


def _device_facts(props, device) -> dict:
    """GPU facts of the device the kernels ran on (Kineto lists every visible GPU)."""
    if not isinstance(props, list):
        return {}
    props = [p for p in props if isinstance(p, dict)]
    p = next((p for p in props if p.get("id") == device), props[0] if props else None)
    if p is None:
        return {}
    out = {}
    if storable_text(p.get("name")):
        out["gpu_name"] = p["name"]
    for src, key in (("numSms", "sm_count"), ("totalGlobalMem", "memory_bytes"), ("l2CacheSize", "l2_bytes")):
        if _int(p.get(src)):
            out[key] = p[src]
    if _int(p.get("computeMajor")) and _int(p.get("computeMinor")):
        out["cc"] = f"{p['computeMajor']}.{p['computeMinor']}"
    return out


def _dist_facts(info) -> dict:
    """rank (only for a job of more than one process, as nsys's), world size, backend."""
    if not isinstance(info, dict):
        return {}
    out = {}
    rank, size = info.get("rank"), info.get("world_size")
    if _int(size):
        out["world_size"] = size
    if storable_text(info.get("backend")):
        out["distributed_backend"] = info["backend"]
    if _int(rank) and rank >= 0 and (size is None or (_int(size) and size > 1)):
        out["rank"] = rank
    return out
