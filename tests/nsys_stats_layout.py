"""`nsys stats --report cuda_gpu_trace --format csv` reproduced from a real nsys SQLite export.

No nsys runs on this machine, so the tests' cuda_gpu_trace tables are made here from the export's
own rows, the way nsys's cuda_gpu_trace report builds them (NVIDIA's Nsight Systems post-collection
analysis guide; the header as nsys 2024+ prints it): kernels, copies and sets by start; grid,
block and registers of kernels; StcSMem/DymSMem/Bytes in MB (10^6 bytes) to 3 decimals;
throughput in MB/s; memory kinds and copy directions by the export's own ENUM tables' labels;
`Device` as `<GPU name> (<device id>)`; a kernel's demangled name, `[CUDA memcpy <direction>]`,
`[CUDA memset]`. On stdout nsys prints a blank line and `Processing [...] with [...]...` first.

    python tests/nsys_stats_layout.py EXPORT.sqlite OUT.csv [--stdout]
"""
from __future__ import annotations

import csv
import io
import sqlite3
import sys
from pathlib import Path

HEADER = ["Start (ns)", "Duration (ns)", "CorrId", "GrdX", "GrdY", "GrdZ", "BlkX", "BlkY", "BlkZ", "Reg/Trd",
          "StcSMem (MB)", "DymSMem (MB)", "Bytes (MB)", "Throughput (MB/s)", "SrcMemKd", "DstMemKd", "Device", "Ctx",
          "GreenCtx", "Strm", "Name"]


def _mb(b) -> str:
    return "" if b is None else f"{b / 1e6:.3f}"


def gpu_trace_rows(export: Path) -> list[list]:
    c = sqlite3.connect(f"{Path(export).resolve().as_uri()}?mode=ro", uri=True)
    tables = {r[0] for r in c.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    strings = dict(c.execute("SELECT id, value FROM StringIds"))
    gpus = dict(c.execute("SELECT id, name FROM TARGET_INFO_GPU")) if "TARGET_INFO_GPU" in tables else {}
    kinds = dict(c.execute("SELECT id, label FROM ENUM_CUDA_MEM_KIND")) if "ENUM_CUDA_MEM_KIND" in tables else {}
    opers = dict(c.execute("SELECT id, label FROM ENUM_CUDA_MEMCPY_OPER")) if "ENUM_CUDA_MEMCPY_OPER" in tables else {}

    def device(d) -> str:
        return f"{gpus.get(d, 'GPU')} ({d})"

    def green(table: str) -> str:
        return "greenContextId" if "greenContextId" in {r[1] for r in c.execute(f"PRAGMA table_info({table})")} \
            else "NULL"

    rows = []
    for r in c.execute(
        "SELECT start, end - start, correlationId, gridX, gridY, gridZ, blockX, blockY, blockZ, registersPerThread,"
        f" staticSharedMemory, dynamicSharedMemory, deviceId, contextId, {green('CUPTI_ACTIVITY_KIND_KERNEL')},"
        " streamId, demangledName FROM CUPTI_ACTIVITY_KIND_KERNEL"
    ):
        rows.append([*r[:10], _mb(r[10]), _mb(r[11]), "", "", "", "", device(r[12]), r[13],
                     "" if r[14] is None else r[14], r[15], strings[r[16]]])
    if "CUPTI_ACTIVITY_KIND_MEMCPY" in tables:
        for s, d, corr, b, k, sk, dk, dev, ctx, g, strm in c.execute(
            "SELECT start, end - start, correlationId, bytes, copyKind, srcKind, dstKind, deviceId, contextId,"
            f" {green('CUPTI_ACTIVITY_KIND_MEMCPY')}, streamId FROM CUPTI_ACTIVITY_KIND_MEMCPY"
        ):
            rows.append([s, d, corr, "", "", "", "", "", "", "", "", "", _mb(b), f"{b / 1e6 / (d / 1e9):.3f}" if d else "",
                         kinds.get(sk, ""), kinds.get(dk, ""), device(dev), ctx, "" if g is None else g, strm,
                         f"[CUDA memcpy {opers.get(k, 'Unknown')}]"])
    if "CUPTI_ACTIVITY_KIND_MEMSET" in tables:
        for s, d, corr, b, mk, dev, ctx, g, strm in c.execute(
            "SELECT start, end - start, correlationId, bytes, memKind, deviceId, contextId,"
            f" {green('CUPTI_ACTIVITY_KIND_MEMSET')}, streamId FROM CUPTI_ACTIVITY_KIND_MEMSET"
        ):
            rows.append([s, d, corr, "", "", "", "", "", "", "", "", "", _mb(b), f"{b / 1e6 / (d / 1e9):.3f}" if d else "",
                         "", kinds.get(mk, ""), device(dev), ctx, "" if g is None else g, strm, "[CUDA memset]"])
    c.close()
    rows.sort(key=lambda r: r[0])
    return rows


def write_gpu_trace(export: Path, out: Path, stdout: bool = False) -> Path:
    """The cuda_gpu_trace table of an export, as `--output` writes it, or as stdout shows it."""
    buf = io.StringIO()
    if stdout:
        buf.write(f"\nProcessing [{Path(export).name}] with [/opt/nvidia/nsight-systems/reports/cuda_gpu_trace.py]... \n")
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(HEADER)
    w.writerows(gpu_trace_rows(export))
    Path(out).write_text(buf.getvalue())
    return Path(out)


if __name__ == "__main__":
    write_gpu_trace(Path(sys.argv[1]), Path(sys.argv[2]), stdout="--stdout" in sys.argv)
