"""What a measurement ran on: GPU, driver and clocks (nvidia-smi) and software versions.

One place for capture metadata and the benchmark scripts' result headers.
"""

from __future__ import annotations

import platform
import re
import subprocess
from typing import Any

# environment variables that change what a profile shows: their values are kept with a run
RESULT_ENV = (
    "CUDA_VISIBLE_DEVICES",
    "CUDA_LAUNCH_BLOCKING",
    "CUBLAS_WORKSPACE_CONFIG",
    "TORCH_CUDNN_V8_API_ENABLED",
    "TRITON_INTERPRET",
    "TORCHINDUCTOR_MAX_AUTOTUNE",
    "NVIDIA_TF32_OVERRIDE",
    "PYTORCH_CUDA_ALLOC_CONF",
    "NCCL_NVLS_ENABLE",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST",
    "NVSHMEM_DISABLE_NVLS",
    "OMP_NUM_THREADS",
    # the lab's own switches: Triton launches through kernels/_launch.py (and its plans), tuning on the GPU
    "PROFKIT_FAST_LAUNCH",
    "PROFKIT_LAUNCH_PLANS",
    "PROFKIT_TUNE",
)
# ...and those that say where a process sat in a job (launchers' rank variables)
_JOB_ENV = (
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "GROUP_RANK",
    "GROUP_WORLD_SIZE",
    "NODE_RANK",
    "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_SIZE",
    "OMPI_COMM_WORLD_LOCAL_RANK",
    "PMI_RANK",
    "PMI_SIZE",
    "SLURM_PROCID",
    "SLURM_NTASKS",
    "SLURM_LOCALID",
    "NVIDIA_VISIBLE_DEVICES",
)
# a name with one of these words never keeps its value, whatever its prefix (NCCL_..._TOKEN);
# words, not substrings: --max-new-tokens and --passes are not secrets
_SECRET_WORDS = {
    "token",
    "secret",
    "password",
    "passwd",
    "passphrase",
    "credential",
    "credentials",
    "cookie",
    "auth",
    "apikey",
    "signature",
    "pwd",
}
_SECRET_PAIRS = {("api", "key"), ("access", "key"), ("private", "key"), ("secret", "key")}
# ...nor a word run together with one of these (--hftoken, WANDBAPIKEY), nor a name whose last
# word is `key` (--wandb-key, WANDB_KEY): a sort key lost from the metadata costs less than a leak
_SECRET_ENDINGS = ("token", "secret", "password", "passwd", "apikey", "passphrase")


def _secret_name(name: str, bare_key: bool = True) -> bool:
    """Whether a variable, option or field name looks like a secret's. `bare_key`: the lone word
    `key` counts (an option `--key X`); a metadata field named `key` (ncu's sampling key) does not."""
    words = [w for w in re.split(r"[^a-z0-9]+", name.lower()) if w]
    return (
        bool(_SECRET_WORDS.intersection(words))
        or any(p in _SECRET_PAIRS for p in zip(words, words[1:]))
        or any(w.endswith(_SECRET_ENDINGS) for w in words)
        or (bool(words) and words[-1] == "key" and (bare_key or len(words) > 1))
    )


# values that are credentials whatever they are called (HF, OpenAI/Anthropic, GitHub, GitLab,
# Google, Slack, AWS keys, JWTs)
_SECRET_VALUE = re.compile(
    r"\b(hf_[A-Za-z0-9]{20,}|sk-[A-Za-z0-9_-]{20,}|gh[pousr]_[A-Za-z0-9]{20,}|"
    r"github_pat_[A-Za-z0-9_]{20,}|glpat-[A-Za-z0-9_-]{20,}|AIza[0-9A-Za-z_-]{30,}|"
    r"xox[abpr]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16}|eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,})"
)
# structure that holds a secret whatever its shape: a URL's password, an HTTP credential header
# (a scheme is short: unbounded, a long run of letters without `://` cost time quadratic in its length)
_URL_PASSWORD = re.compile(r"([A-Za-z][A-Za-z0-9+.-]{0,31}://[^/\s:@]*):[^@\s/]+@")
_HEADER = re.compile(r"(?i)\b((?:proxy-)?authorization|x-api-key|api-key|x-auth-token|cookie)(\s*:\s*)[^'\"\r\n]+")
_SCHEME = re.compile(r"(?i)\b(bearer|basic|token)(\s+)[A-Za-z0-9._~+/=-]{4,}")
# NAME=VALUE anywhere in a text (`env X=..`, `docker -e X=..`, `bash -c 'X=.. python'`, `a=1,password=..`)
_ASSIGN = re.compile(r"(?<![A-Za-z0-9_.-])([A-Za-z_][A-Za-z0-9_.-]*)=")
_VALUE_END = re.compile(r"[\s,;&|'\"]")
REDACTED = "(redacted)"


def redact_text(text: str) -> str:
    """TEXT with every secret it holds replaced: credential-shaped tokens, a URL's password, a
    credential header's value, the value of a NAME=VALUE pair whose name looks secret, and, in
    a text holding a command line, the value after an option named like a secret."""
    text = str(text)
    text = _SECRET_VALUE.sub(REDACTED, text)
    text = _URL_PASSWORD.sub(rf"\1:{REDACTED}@", text)
    text = _HEADER.sub(rf"\1\2{REDACTED}", text)
    text = _SCHEME.sub(rf"\1\2{REDACTED}", text)
    out, at = [], 0
    for m in _ASSIGN.finditer(text):
        if m.start() < at or not _secret_name(m.group(1)):
            continue
        end = _VALUE_END.search(text, m.end())
        stop = end.start() if end else len(text)
        if stop > m.end():
            out += [text[at : m.end()], REDACTED]
            at = stop
    text = "".join(out) + text[at:]
    if re.search(r"\s", text):  # a command line in one string: its options pair with their values
        parts = re.split(r"(\s+)", text)
        words = redact_args([p for p in parts[::2]], _inner=True)
        parts[::2] = words
        text = "".join(parts)
    return text


def redact_env(env: dict[str, str]) -> dict[str, str]:
    """kept_env with each kept value scrubbed (a *_VERSION holding a URL with its password)."""
    return {k: redact_text(v) for k, v in kept_env(env).items()}


def kept_env(env: dict[str, str]) -> dict[str, str]:
    """The variables of a program's environment that profkit keeps with a run (RESULT_ENV and
    the job-layout ones): every other value may be anyone's credential (nsys records the whole
    environment; public exports have carried live HF tokens) and is dropped."""
    return {
        k: v
        for k, v in env.items()
        if (k in RESULT_ENV or k in _JOB_ENV or str(k).endswith("_VERSION"))  # versions: CUDA_VERSION, NCCL_VERSION
        and not _secret_name(str(k))
        and not _SECRET_VALUE.search(str(v))
    }


def redact_args(args: list[str], _inner: bool = False) -> list[str]:
    """A command line as stored: the value of an option named like a secret (`--hf-token X`,
    `--api-key=X`, `--hftoken X`, `-pPASSWORD`), NAME=VALUE pairs named like one (`env
    WANDB_API_KEY=X`, `docker -e HF_TOKEN=X`), and whatever redact_text finds in each argument
    (a `bash -c` line, a URL's password, a header, a credential-shaped token) become (redacted)."""
    out, hide_next = [], False
    for a in args:
        a = str(a)
        if hide_next and a:
            out.append(REDACTED)
            hide_next = False
            continue
        bare = a.lstrip("'\"")
        name, eq, _ = bare.partition("=")
        if bare.startswith("-") and _secret_name(name):
            if eq:
                out.append(a[: len(a) - len(bare)] + f"{name}={REDACTED}")
            else:
                out.append(a)
                hide_next = True
            continue
        if re.fullmatch(r"-p\S+", bare) and not bare[2:].isdigit():  # mysql's -pPASSWORD (not -p8080)
            out.append(a[: len(a) - len(bare)] + f"-p{REDACTED}")
            continue
        out.append(a if _inner else redact_text(a))
    return out


def scrub_meta(meta, _depth: int = 0):
    """A run's metadata (capture.json, a parser's facts) as stored: every command line through
    redact_args, every environment through redact_env, every other text through redact_text, a
    key named like a secret without its value. Nesting deeper than 64 levels is cut."""
    if _depth > 64:
        return REDACTED
    if isinstance(meta, dict):
        out: dict[str, Any] = {}
        for k, v in meta.items():
            key = str(k)
            if _secret_name(key, bare_key=False) and v is not None and not isinstance(v, (bool, int, float)):
                out[key] = REDACTED
            elif key.lower() in ("command", "argv", "args", "cmd") and isinstance(v, list):
                out[key] = redact_args(v)
            elif key.lower() in ("env", "environment") or key.endswith(":ENVIRONMENT"):
                out[key] = redact_env({str(a): str(b) for a, b in v.items()}) if isinstance(v, dict) else REDACTED
            else:
                out[key] = scrub_meta(v, _depth + 1)
        return out
    if isinstance(meta, (list, tuple)):
        return [scrub_meta(v, _depth + 1) for v in meta]
    if isinstance(meta, str):
        return redact_text(meta)
    return meta


def gpu() -> dict:
    """First GPU as nvidia-smi reports it; {} where there is none."""
    try:
        q = subprocess.run(
            [
                "nvidia-smi",
                "--query-gpu=name,uuid,driver_version,clocks.sm,clocks.mem",
                "--format=csv,noheader,nounits",
            ],
            capture_output=True,
            text=True,
            timeout=30,
        )
        if q.returncode != 0 or not q.stdout.strip():
            return {}
        name, uuid, driver, sm, mem = [x.strip() for x in q.stdout.splitlines()[0].split(",")]
        return {
            "gpu_name": name,
            "gpu_uuid": uuid,
            "driver": driver,
            "sm_clock_mhz_at_start": float(sm),
            "mem_clock_mhz_at_start": float(mem),
        }
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
        q = subprocess.run(
            ["nvidia-smi", "--query-gpu=index,name,uuid,pci.bus_id", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        if q.returncode == 0 and q.stdout.strip():
            out["gpus"] = [
                dict(zip(("index", "name", "uuid", "pci_bus_id"), [x.strip() for x in line.split(",")]))
                for line in q.stdout.strip().splitlines()
            ]
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

    info = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "host": platform.node(),
        "device": device,
        "interpreter": os.environ.get("TRITON_INTERPRET", "0"),
        **versions(),
        "gpu": None,
        "driver": None,
    }
    if device == "cuda":
        import torch

        p = torch.cuda.get_device_properties(0)
        smi = gpu()
        info.update(
            gpu=p.name,
            driver=smi.get("driver"),
            gpu_uuid=smi.get("gpu_uuid"),
            sms=p.multi_processor_count,
            memory_gib=round(p.total_memory / 2**30, 1),
            capability=".".join(map(str, torch.cuda.get_device_capability(0))),
            sm_clock_mhz_at_start=smi.get("sm_clock_mhz_at_start"),
        )
    return info
