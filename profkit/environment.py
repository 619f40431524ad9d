"""What a measurement ran on: GPU, driver and clocks (nvidia-smi) and software versions.

One place for capture metadata and the benchmark scripts' result headers.
"""
from __future__ import annotations

import platform
import re
import subprocess


def gpu() -> dict:
    """First GPU as nvidia-smi reports it; {} where there is none."""
    try:
        q = subprocess.run(["nvidia-smi", "--query-gpu=name,uuid,driver_version,clocks.sm,clocks.mem",
                            "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=30)
        if q.returncode != 0 or not q.stdout.strip():
            return {}
        name, uuid, driver, sm, mem = [x.strip() for x in q.stdout.splitlines()[0].split(",")]
        return {"gpu_name": name, "gpu_uuid": uuid, "driver": driver,
                "sm_clock_mhz_at_start": float(sm), "mem_clock_mhz_at_start": float(mem)}
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return {}


def versions() -> dict:
    """python, torch, triton and CUDA (as torch was built) versions; absent packages left out."""
    out = {"python": platform.python_version()}
    for mod in ("torch", "triton"):
        try:
            m = __import__(mod)
        except Exception:
            continue
        out[mod] = m.__version__
        if mod == "torch":
            out["cuda"] = m.version.cuda
    return out


def gpus() -> dict:
    """Every GPU (index, name, UUID, PCI bus) and their links (`nvidia-smi topo -m`): where
    the ranks of a multi-process run ran. {} where there is no nvidia-smi."""
    out: dict = {}
    try:
        q = subprocess.run(["nvidia-smi", "--query-gpu=index,name,uuid,pci.bus_id", "--format=csv,noheader"],
                           capture_output=True, text=True, timeout=30)
        if q.returncode == 0 and q.stdout.strip():
            out["gpus"] = [dict(zip(("index", "name", "uuid", "pci_bus_id"), [x.strip() for x in line.split(",")]))
                           for line in q.stdout.strip().splitlines()]
        t = subprocess.run(["nvidia-smi", "topo", "-m"], capture_output=True, text=True, timeout=30)
        if t.returncode == 0 and t.stdout.strip():
            out["topology"] = re.sub(r"\x1b\[[0-9;]*m", "", t.stdout).rstrip()  # nvidia-smi underlines the header
    except (OSError, subprocess.TimeoutExpired):
        pass
    return out


def result_header(device: str) -> dict:
    """What every benchmark result file starts with: date, host, versions, and on a GPU its
    name, UUID, driver, SM count, memory, capability and SM clock at start."""
    import datetime
    import os

    info = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "host": platform.node(), "device": device, "interpreter": os.environ.get("TRITON_INTERPRET", "0"),
            **versions(), "gpu": None, "driver": None}
    if device == "cuda":
        import torch

        p = torch.cuda.get_device_properties(0)
        smi = gpu()
        info.update(gpu=p.name, driver=smi.get("driver"), gpu_uuid=smi.get("gpu_uuid"), sms=p.multi_processor_count,
                    memory_gib=round(p.total_memory / 2**30, 1),
                    capability=".".join(map(str, torch.cuda.get_device_capability(0))),
                    sm_clock_mhz_at_start=smi.get("sm_clock_mhz_at_start"))
    return info
