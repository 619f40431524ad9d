"""Measured peaks: ceilings a benchmark measured on a GPU model (device-to-device copy
bandwidth, cuBLAS and _scaled_mm throughput), kept in a small JSON file the caller names.

The roofline draws them dashed beside the report's own peaks; it never looks for them itself
(no file is read from the working directory or the install location). The shipped profiles
carry theirs in profiles/peaks.json, written by benchmarks/peaks.py from benchmarks/results/.

    {"peaks": [{"gpu": "NVIDIA H200", "ceiling": "dram", "kind": "memory", "value": 4.249e12,
                "label": "DRAM copy (measured)", "how": "measured device-to-device copy, 4 GiB (kernels.json, 2026-11-22)"}]}
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from profkit.core.errors import BadInput

# benchmark results: key there -> ceiling key and label
_MEASURED_FLOPS = {
    "bf16_tflops": ("bf16_tensor", "BF16 tensor"),
    "fp16_tflops": ("fp16_tensor", "FP16 tensor"),
    "fp8_tflops": ("fp8_tensor", "FP8 tensor"),
    "tf32_tflops": ("tf32_tensor", "TF32 tensor"),
    "fp32_tflops": ("fp32", "FP32"),
    "fp64_tflops": ("fp64", "FP64"),
}
_FIELDS = ("gpu", "ceiling", "kind", "value", "label", "how")


def from_results(files) -> list[dict]:
    """Peak records from benchmark result files (JSON with env.gpu, copy.gbps, peaks.*_tflops);
    a later file's value for the same GPU and ceiling wins."""
    out: dict[tuple, dict] = {}
    for f in sorted(Path(p) for p in files):
        try:
            d = json.loads(f.read_text())
        except (OSError, ValueError):
            continue
        if not isinstance(d, dict):
            continue
        info = d.get("env") or d.get("info") or {}
        gpu = info.get("gpu") if isinstance(info, dict) else None
        if not gpu:
            continue
        when = f"{f.name}, {str(info.get('date', '?'))[:10]}"
        copy = d.get("copy")
        if isinstance(copy, dict) and copy.get("gbps"):
            out[(gpu, "dram")] = {
                "gpu": gpu,
                "ceiling": "dram",
                "kind": "memory",
                "value": copy["gbps"] * 1e9,
                "label": "DRAM copy (measured)",
                "how": f"measured device-to-device copy, {copy.get('bytes', 0) / 2**30:.0f} GiB ({when})",
            }
        peaks = d.get("peaks")
        if isinstance(peaks, dict):
            for name, (key, label) in _MEASURED_FLOPS.items():
                if peaks.get(name):
                    how = peaks.get(name.replace("_tflops", "_how"), "measured")
                    out[(gpu, key)] = {
                        "gpu": gpu,
                        "ceiling": key,
                        "kind": "compute",
                        "value": peaks[name] * 1e12,
                        "label": f"{label} (measured)",
                        "how": f"{how} ({when})",
                    }
    return list(out.values())


def read(path) -> list[dict]:
    """The peak records of a peaks file, whole or refused (BadInput)."""
    from profkit.core import jsonfile

    path = Path(path)
    doc = jsonfile.load(path)
    rows = doc.get("peaks") if isinstance(doc, dict) else None
    if not isinstance(rows, list):
        raise BadInput(path, 'not a peaks file: expected {"peaks": [...]}')
    for i, r in enumerate(rows):
        ok = (
            isinstance(r, dict)
            and all(k in r for k in _FIELDS)
            and r["kind"] in ("memory", "compute")
            and isinstance(r["value"], (int, float))
            and math.isfinite(r["value"])
            and r["value"] > 0
            and all(isinstance(r[k], str) for k in _FIELDS if k != "value")
        )
        if not ok:
            raise BadInput(path, f"peak {i}: needs {', '.join(_FIELDS)} (kind memory|compute, value > 0)")
    return rows


def write(path, rows: list[dict]) -> Path:
    path = Path(path)
    path.write_text(json.dumps({"peaks": rows}, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return path


def for_gpu(rows: list[dict] | None, gpu: str | None) -> list[dict]:
    return [r for r in rows or () if gpu and r["gpu"] == gpu]
