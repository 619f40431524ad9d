"""In-process CUPTI activity tracer: the fallback timeline where Nsight Systems is missing.

    python -m profkit.capture.cupti_tracer -o trace.cupti.jsonl -- -m profkit.kernels.run rmsnorm
    python -m profkit.capture.cupti_tracer -o trace.cupti.jsonl -- my_script.py --arg

Records kernels, CUDA runtime and driver API calls, and NVTX ranges. NVTX reaches CUPTI only
through NVTX_INJECTION64_PATH, read once at the first NVTX call, and only when it names the very
libcupti this process loaded: a second copy of the library (another wheel, the CUDA toolkit's)
gets the NVTX calls but has no activity buffers, so no marker ever arrives. The tracer therefore
points the variable at the library it loaded, before the workload makes its first NVTX call.
Writes one JSON object per line: the meta record, the records, and (format version 2) an end
record {"type": "end", "records": N, "kernels": K} that lets parsers/cupti_trace.py refuse a copy
cut at a line end; version 1 traces (written before) load with a note saying that cannot be seen.
"""

from __future__ import annotations

import json
import os
import runpy
import socket
import sys
import time

from profkit.core import environment
from profkit.parsers.cupti_trace import TRACE_FORMAT as FORMAT
from profkit.parsers.cupti_trace import TRACE_VERSION as FORMAT_VERSION


class Tracer:
    def __init__(self) -> None:
        from cupti import cupti

        self.cupti = cupti
        self.records: list[dict] = []
        self.errors = 0
        self.kinds = [
            cupti.ActivityKind.CONCURRENT_KERNEL,
            cupti.ActivityKind.RUNTIME,
            cupti.ActivityKind.DRIVER,
            cupti.ActivityKind.MARKER,
        ]
        self._names: dict[tuple[int, int], str] = {}

    def _api_name(self, domain, cbid: int) -> str:
        key = (int(domain), cbid)
        if key not in self._names:
            try:
                self._names[key] = self.cupti.get_callback_name(domain, cbid)
            except Exception:
                self._names[key] = f"cbid_{cbid}"
        return self._names[key]

    def _buffer_requested(self):
        return 8 * 1024 * 1024, 0

    def _buffer_completed(self, activities) -> None:
        c = self.cupti
        K = c.ActivityKind
        for a in activities:
            try:
                kind = int(a.kind)
                if kind == K.CONCURRENT_KERNEL:
                    self.records.append(
                        {
                            "type": "kernel",
                            "name": a.name,
                            "start": a.start,
                            "end": a.end,
                            "correlation_id": a.correlation_id,
                            "device": a.device_id,
                            "context": a.context_id,
                            "stream": a.stream_id,
                            "grid": [a.grid_x, a.grid_y, a.grid_z],
                            "block": [a.block_x, a.block_y, a.block_z],
                            "registers_per_thread": a.registers_per_thread,
                            "static_shared_memory": a.static_shared_memory,
                            "dynamic_shared_memory": a.dynamic_shared_memory,
                        }
                    )
                elif kind in (K.RUNTIME, K.DRIVER):
                    domain = c.CallbackDomain.RUNTIME_API if kind == K.RUNTIME else c.CallbackDomain.DRIVER_API
                    self.records.append(
                        {
                            "type": "runtime" if kind == K.RUNTIME else "driver",
                            "name": self._api_name(domain, a.cbid),
                            "cbid": a.cbid,
                            "start": a.start,
                            "end": a.end,
                            "pid": a.process_id,
                            "tid": a.thread_id,
                            "correlation_id": a.correlation_id,
                        }
                    )
                elif kind == K.MARKER:
                    pt = a.object_id.pt
                    self.records.append(
                        {
                            "type": "marker",
                            "id": a.id,
                            "flags": int(a.flags_),
                            "timestamp": a.timestamp,
                            "name": a.name or None,
                            "domain": a.domain or None,
                            "pid": pt.process_id,
                            "tid": pt.thread_id,
                        }
                    )
            except Exception:
                self.errors += 1

    def start(self) -> None:
        c = self.cupti
        c.set_thread_id_type(c.ActivityThreadIdType.SYSTEM)  # OS thread ids, as nsys reports them
        c.activity_register_callbacks(self._buffer_requested, self._buffer_completed)
        for k in self.kinds:
            c.activity_enable(k)

    def stop(self) -> None:
        c = self.cupti
        c.activity_flush_all(1)
        for k in self.kinds:
            c.activity_disable(k)
        c.finalize()


def loaded_libcupti(maps: str = "/proc/self/maps") -> list[str]:
    """Paths of the libcupti copies mapped into this process."""
    try:
        with open(maps) as f:
            paths = {line.split(None, 5)[-1].strip() for line in f if "libcupti" in line}
    except OSError:
        return []
    return sorted(p for p in paths if p.startswith("/"))


def point_nvtx_at(loaded: list[str], environ=os.environ) -> dict:
    """Aim NVTX injection at the libcupti in use; returns what was found and done, for the header."""
    before = environ.get("NVTX_INJECTION64_PATH")
    facts = {"nvtx_injection_before": before, "libcupti_loaded": loaded}
    if len(loaded) == 1 and (not before or os.path.realpath(before) != os.path.realpath(loaded[0])):
        environ["NVTX_INJECTION64_PATH"] = loaded[0]
    facts["nvtx_injection"] = environ.get("NVTX_INJECTION64_PATH")
    return facts


def _device_facts() -> dict:
    try:
        import torch

        if torch.cuda.is_available():
            p = torch.cuda.get_device_properties(0)
            return {
                "gpu_name": p.name,
                "sm_count": p.multi_processor_count,
                "memory_bytes": p.total_memory,
                "cc": f"{p.major}.{p.minor}",
            }
    except Exception:
        pass
    return {}


def trace(out: str, target: list[str]) -> int:
    tracer = Tracer()
    header = {
        "type": "meta",
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "argv": environment.redact_args(target),
        "started_at": time.time(),
    }
    tracer.start()
    header.update(point_nvtx_at(loaded_libcupti()))
    code = 0
    old_argv = sys.argv
    try:
        if target[0] == "-m":
            sys.argv = [target[1], *target[2:]]
            runpy.run_module(target[1], run_name="__main__", alter_sys=True)
        else:
            sys.argv = list(target)
            runpy.run_path(target[0], run_name="__main__")
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    finally:
        sys.argv = old_argv
        tracer.stop()
        header.update(_device_facts())
        header["unreadable_records"] = tracer.errors  # records CUPTI delivered that could not be converted
        write_trace(out, header, tracer.records)
    return code


def write_trace(out: str, header: dict, records: list[dict]) -> None:
    """The trace file: the meta line, one line per record, and the end record that tells a
    whole trace from a cut copy. Written beside `out` and renamed, so `out` is whole or absent."""
    tmp = out + ".tmp"
    kernels = sum(1 for r in records if r.get("type") == "kernel")
    with open(tmp, "w") as f:
        f.write(json.dumps(dict(header, version=FORMAT_VERSION)) + "\n")
        for r in records:
            f.write(json.dumps(r) + "\n")
        f.write(json.dumps({"type": "end", "records": len(records), "kernels": kernels}) + "\n")
    os.replace(tmp, out)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) < 4 or argv[0] != "-o" or argv[2] != "--":
        print(
            "usage: python -m profkit.capture.cupti_tracer -o OUT.jsonl -- (-m MODULE | SCRIPT) [ARGS...]",
            file=sys.stderr,
        )
        return 2
    return trace(argv[1], argv[3:])


if __name__ == "__main__":
    sys.exit(main())
