"""What a measurement ran on: GPU, driver and clocks (nvidia-smi) and software versions.

One place for capture metadata and the benchmark scripts' result headers.
"""
from __future__ import annotations

import platform
import re
import subprocess


# environment variables that change what a profile shows: their values are kept with a run
RESULT_ENV = ("CUDA_VISIBLE_DEVICES", "CUDA_LAUNCH_BLOCKING", "CUBLAS_WORKSPACE_CONFIG", "TORCH_CUDNN_V8_API_ENABLED",
              "TRITON_INTERPRET", "TORCHINDUCTOR_MAX_AUTOTUNE", "NVIDIA_TF32_OVERRIDE", "PYTORCH_CUDA_ALLOC_CONF",
              "NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS", "OMP_NUM_THREADS",
              # the lab's own switches: Triton launches through kernels/_launch.py (and its plans), tuning on the GPU
              "PROFKIT_FAST_LAUNCH", "PROFKIT_LAUNCH_PLANS", "PROFKIT_TUNE")
# ...and those that say where a process sat in a job (launchers' rank variables)
_JOB_ENV = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE", "NODE_RANK",
            "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "PMI_RANK", "PMI_SIZE",
            "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "NVIDIA_VISIBLE_DEVICES")
# a name with one of these words never keeps its value, whatever its prefix (NCCL_..._TOKEN);
# words, not substrings: --max-new-tokens and --passes are not secrets
_SECRET_WORDS = {"token", "secret", "password", "passwd", "passphrase", "credential", "credentials", "cookie", "auth",
                 "apikey", "signature"}
_SECRET_PAIRS = {("api", "key"), ("access", "key"), ("private", "key"), ("secret", "key")}


def _secret_name(name: str) -> bool:
    words = [w for w in re.split(r"[^a-z0-9]+", name.lower()) if w]
    return bool(_SECRET_WORDS.intersection(words)) or any(p in _SECRET_PAIRS for p in zip(words, words[1:]))


# values that are credentials whatever they are called (HF, OpenAI/Anthropic, GitHub, Slack, AWS keys, JWTs)
_SECRET_VALUE = re.compile(r"\b(hf_[A-Za-z0-9]{20,}|sk-[A-Za-z0-9_-]{20,}|gh[pousr]_[A-Za-z0-9]{20,}|"
                           r"xox[abpr]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16}|eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,})")
REDACTED = "(redacted)"


def kept_env(env: dict[str, str]) -> dict[str, str]:
    """The variables of a program's environment that profkit keeps with a run (RESULT_ENV and
    the job-layout ones): every other value may be anyone's credential (nsys records the whole
    environment; public exports have carried live HF tokens) and is dropped."""
    return {k: v for k, v in env.items()
            if (k in RESULT_ENV or k in _JOB_ENV or k.endswith("_VERSION"))  # versions: CUDA_VERSION, NCCL_VERSION
            and not _secret_name(k) and not _SECRET_VALUE.search(str(v))}


def redact_args(args: list[str]) -> list[str]:
    """A command line as stored: the value of an option named like a secret (`--hf-token X`,
    `--api-key=X`) and any argument that looks like a credential become (redacted)."""
    out, hide_next = [], False
    for a in args:
        a = str(a)
        if hide_next:
            out.append(REDACTED)
            hide_next = False
            continue
        name, eq, _ = a.partition("=")
        if a.startswith("-") and _secret_name(name):
            if eq:
                out.append(f"{name}={REDACTED}")
            else:
                out.append(a)
                hide_next = True
            continue
        out.append(_SECRET_VALUE.sub(REDACTED, a))
    return out


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
