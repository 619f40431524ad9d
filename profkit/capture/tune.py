"""`profkit tune`: autotune a user's Triton kernel over a configuration space, checking every
candidate against the user's reference, timing it with the lab's harness, and keeping every
trial and the chosen configuration per kernel, shape and GPU in the database (`tuning` view).

The user's module (a file or an importable module) holds the @triton.jit KERNEL and, by
default under these names (flags choose others):

    def inputs(shape: dict, device: str) -> the launcher's inputs (any object)
    def launch(inputs, config: dict) -> output tensor(s)   # runs KERNEL with config's values
    def reference(inputs) -> the expected output (float64 welcome)

A configuration is a dict of the kernel's constexpr parameters plus `num_warps` and
`num_stages`. The default space comes from the kernel's signature (its constexprs named
BLOCK* / GROUP*); a space file (JSON, or YAML when PyYAML is installed) gives
``{"BLOCK": [256, 1024], "num_warps": [4, 8]}`` (every combination) or a list of configs.

Trials are written one by one (a killed run loses at most the trial in flight) and keyed by
kernel, source hash, shape, GPU and config: running again skips what is done (resumable), a
changed kernel source tunes afresh. Torch and Triton are imported on use: the core install
has neither and gets one line saying so.
"""

from __future__ import annotations

import hashlib
import inspect
import itertools
import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from profkit.core.errors import BadArgument, BadInput, ToolMissing
from profkit.core.usercode import load_module
from profkit.store.store import Store

DEFAULT_WARPS = (2, 4, 8)
DEFAULT_STAGES = (2, 3, 4)
BLOCK_1D = (128, 256, 512, 1024, 2048, 4096)
BLOCK_ND = (32, 64, 128)
GROUP = (1, 8)


@dataclass
class Target:
    spec: str  # MODULE:KERNEL, the module named by its import name or file stem
    kernel: object  # the @triton.jit function
    launch: Callable[..., Any]
    inputs: Callable[..., Any]
    reference: Callable[..., Any]
    source_hash: str


@dataclass
class Trial:
    config: dict
    ok: bool | None  # None: not run (failed to compile / launch)
    ms: float | None
    rel_err: float | None
    error: str | None = None
    reused: bool = False


@dataclass
class ShapeResult:
    shape: dict
    trials: list[Trial] = field(default_factory=list)
    best: Trial | None = None
    stopped: str | None = None  # why tuning stopped early (time budget)


def _need_lab():
    try:
        import torch  # noqa: F401
        import triton  # noqa: F401
    except ImportError:
        raise ToolMissing("profkit tune and bench need torch and triton: pip install 'profkit[kernels]'") from None


def load(spec: str, launch: str = "launch", inputs: str = "inputs", reference: str = "reference") -> Target:
    mod_name, sep, kernel_name = spec.rpartition(":")
    if not sep or not mod_name or not kernel_name:
        raise BadArgument(
            f"{spec!r}: name the kernel as MODULE:KERNEL (a module or a .py file, and its @triton.jit function)"
        )
    _need_lab()
    mod = load_module(mod_name)
    got = {}
    for what, name in (("kernel", kernel_name), ("launch", launch), ("inputs", inputs), ("reference", reference)):
        fn = getattr(mod, name, None)
        if fn is None:
            raise BadArgument(f"{mod_name} has no {name!r} ({what}; see `profkit tune --help`)")
        got[what] = fn
    if not hasattr(got["kernel"], "arg_names"):
        raise BadArgument(f"{spec}: {kernel_name} is not a @triton.jit kernel")
    src = getattr(got["kernel"], "src", None) or inspect.getsource(got["kernel"].fn)
    digest = hashlib.sha256((src + inspect.getsource(got["launch"])).encode()).hexdigest()[:16]
    ident = f"{Path(mod_name).stem if mod_name.endswith('.py') else mod_name}:{kernel_name}"
    return Target(ident, got["kernel"], got["launch"], got["inputs"], got["reference"], digest)


def constexprs(kernel) -> list[str]:
    """The kernel's tl.constexpr parameter names, in signature order."""
    names = list(kernel.arg_names)
    idx = getattr(kernel, "constexprs", None)
    if idx is not None:
        return [names[i] for i in idx]
    # TRITON_INTERPRET=1 hands out an InterpretedFunction: read the annotations of the function
    import triton.language as tl

    out = []
    for p in inspect.signature(kernel.fn).parameters.values():
        a = p.annotation
        if a is tl.constexpr or (isinstance(a, str) and a.split(".")[-1] == "constexpr"):
            out.append(p.name)
    return out


def default_space(kernel) -> dict[str, list]:
    """Candidates from the signature: BLOCK* (one: 128..4096, several: 32..128 each), GROUP*,
    plus num_warps and num_stages. Other constexprs need a space file."""
    cs = constexprs(kernel)
    blocks = [c for c in cs if c.upper().startswith("BLOCK")]
    space: dict[str, list] = {}
    for c in blocks:
        space[c] = list(BLOCK_1D if len(blocks) == 1 else BLOCK_ND)
    for c in cs:
        if c.upper().startswith("GROUP"):
            space[c] = list(GROUP)
    space["num_warps"] = list(DEFAULT_WARPS)
    space["num_stages"] = list(DEFAULT_STAGES)
    return space


def read_space(path) -> list[dict]:
    """Configurations from a space file: a dict of candidate lists (every combination), or a
    list of configurations. JSON always; YAML when PyYAML is installed."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise BadInput(path, f"cannot read ({e.strerror or e})") from None
    if path.suffix.lower() in (".yaml", ".yml"):
        try:
            import yaml
        except ImportError:
            raise ToolMissing("a YAML space file needs PyYAML (pip install pyyaml); or write it as JSON") from None
        try:
            doc = yaml.safe_load(text)
        except yaml.YAMLError as e:
            raise BadInput(path, f"not YAML ({e})") from None
    else:
        try:
            doc = json.loads(text)
        except ValueError as e:
            raise BadInput(path, f"not JSON ({e})") from None
    return expand(doc, path)


def expand(space, where="space") -> list[dict]:
    if isinstance(space, dict):
        if not space or not all(isinstance(v, list) and v for v in space.values()):
            raise BadInput(where, "a space maps each parameter to a non-empty list of candidates")
        keys = list(space)
        return [dict(zip(keys, vals)) for vals in itertools.product(*(space[k] for k in keys))]
    if isinstance(space, list) and space and all(isinstance(c, dict) for c in space):
        return [dict(c) for c in space]
    raise BadInput(where, "a space is {param: [candidates]} or a list of {param: value} configurations")


def parse_shape(text: str) -> dict:
    """'n=1048576,dtype=bf16' -> {'n': 1048576, 'dtype': 'bf16'} (integers where they parse)."""
    out: dict[str, int | float | str] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        k, sep, v = part.partition("=")
        if not sep or not k:
            raise BadArgument(f"shape {text!r}: write NAME=VALUE[,NAME=VALUE...]")
        try:
            out[k] = int(v)
        except ValueError:
            try:
                out[k] = float(v)
            except ValueError:
                out[k] = v
    if not out:
        raise BadArgument(f"shape {text!r}: write NAME=VALUE[,NAME=VALUE...]")
    return out


def _key(d: dict) -> str:
    return json.dumps(d, sort_keys=True, separators=(",", ":"))


def _device() -> str:
    import os

    import torch

    if torch.cuda.is_available():
        return "cuda"
    if os.environ.get("TRITON_INTERPRET") == "1":
        return "cpu"
    raise ToolMissing(
        "no CUDA GPU: run on a GPU, or set TRITON_INTERPRET=1 to run Triton kernels on the CPU "
        "(checks the plumbing; the times mean nothing)"
    )


def _check(out, ref):
    """(ok, relative L2 error) under the lab's tolerance for the output's dtype."""
    from profkit.kernels._numerics import dtype_name, measure

    outs = out if isinstance(out, (tuple, list)) else (out,)
    dt = dtype_name(outs[0].dtype) if outs[0].dtype in _known_dtypes() else "fp32"
    r = measure(out, ref, dt)
    return r.ok, r.rel_err


def _known_dtypes():
    import torch

    return (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def tune(
    db: str, target: Target, shapes: list[dict], configs: list[dict], budget_s: float | None = None, progress=None
) -> list[ShapeResult]:
    """Try every configuration on every shape (skipping trials already in the database),
    record each, and mark the fastest correct one per shape. `progress(done, total, what)`."""
    from profkit.kernels.timing import header, timer

    device = _device()
    gpu = header(device).get("gpu") or "cpu"
    bench = timer(device)
    start = time.monotonic()
    results = []
    total = len(shapes) * len(configs)
    done = 0
    with Store(db) as store:
        for shape in shapes:
            res = ShapeResult(shape)
            have = store.trials(target.spec, target.source_hash, _key(shape), gpu)
            inputs = target.inputs(shape, device)
            ref = target.reference(inputs)
            for cfg in configs:
                done += 1
                key = _key(cfg)
                if key in have:
                    t = have[key]
                    res.trials.append(Trial(cfg, t["ok"], t["ms"], t["rel_err"], t["error"], reused=True))
                    continue
                if budget_s is not None and time.monotonic() - start > budget_s:
                    res.stopped = f"time budget of {budget_s:g} s spent; run again to go on (done trials are kept)"
                    break
                if progress:
                    progress(done, total, f"{_key(shape)} {key}")
                trial = _try(target, inputs, ref, cfg, bench)
                store.add_trial(
                    target.spec,
                    target.source_hash,
                    _key(shape),
                    gpu,
                    key,
                    trial.ok,
                    trial.ms,
                    trial.rel_err,
                    trial.error,
                )
                res.trials.append(trial)
            ok = [t for t in res.trials if t.ok and t.ms is not None]
            res.best = min(ok, key=lambda t: t.ms if t.ms is not None else math.inf) if ok else None  # (all timed)
            results.append(res)
            if res.stopped:
                break
    return results


def _try(target: Target, inputs, ref, cfg: dict, bench) -> Trial:
    try:
        out = target.launch(inputs, dict(cfg))
        ok, err = _check(out, ref)
    except Exception as e:  # a configuration that does not compile or launch (too much shared memory...)
        return Trial(cfg, None, None, None, f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300])
    if not ok:
        return Trial(cfg, False, None, err, "wrong result: relative error over the tolerance")
    try:
        ms = bench(lambda: target.launch(inputs, dict(cfg)))
    except Exception as e:
        return Trial(cfg, None, None, err, f"{type(e).__name__} while timing"[:300])
    return Trial(cfg, True, ms, err)


def best(db: str, spec: str, shape: dict, gpu: str) -> dict | None:
    """The chosen configuration of a kernel for a shape on a GPU (what a program reuses)."""
    with Store(db) as s:
        rows = s.query(
            "SELECT config FROM tuning WHERE kernel = ? AND shape = ? AND gpu = ? AND chosen = 1",
            (spec, _key(shape), gpu),
        )
    return json.loads(rows[0]["config"]) if rows else None
