"""The lab's timing harness, one copy for every benchmark (benchmarks/kernels.py, gemm.py, and
later `profkit bench` / `profkit tune`).

    bench = timer("cuda")                  # do_bench median, ms
    ms = bench(rotating(fn, states))       # inputs rotated past the L2
    copy = copy_bandwidth("cuda", bench)   # the memory ceiling of this run
    row = {**stamp(header("cuda")), ...}   # GPU, driver, torch, triton, date on every row

On a GPU: ``triton.testing.do_bench`` (CUDA events around each call, the L2 flushed before
it, warm-up and repetitions in milliseconds), median. do_bench's flush (a 256 MB memset) runs
before each call's start event, so a launcher's host time is hidden up to the flush time
(tens of microseconds); ``graph_timer`` replays a CUDA graph of the calls instead, GPU time
only. On the CPU (TRITON_INTERPRET=1 selftests) the host clock of one call: the number only
checks the plumbing.
"""

from __future__ import annotations

import math
import statistics
import time

ROTATE_BYTES = 512 << 20  # rotate input copies until the working set is ~8x an H100/H200 L2
COPY_BYTES = 2 << 30


def timer(device: str, warmup_ms: float = 25, rep_ms: float = 100):
    """bench(fn) -> median ms of one call."""
    if device == "cuda":
        from triton.testing import do_bench

        def bench(fn):
            return float(do_bench(fn, warmup=warmup_ms, rep=rep_ms, return_mode="median"))

        return bench

    def bench_cpu(fn):
        ts = []
        for _ in range(2):
            t = time.perf_counter()
            fn()
            ts.append((time.perf_counter() - t) * 1e3)
        return statistics.median(ts)

    return bench_cpu


def graph_timer(rep_ms: float = 100):
    """bench(fn) -> median ms of one call replayed in a CUDA graph (no launcher host time)."""
    from triton.testing import do_bench_cudagraph

    def bench(fn):
        return float(do_bench_cudagraph(fn, rep=rep_ms, return_mode="median"))

    return bench


def state_bytes(state) -> int:
    import torch

    vals = state.values() if isinstance(state, dict) else state
    return sum(v.numel() * v.element_size() for v in vals if isinstance(v, torch.Tensor))


def n_copies(state, device: str, rotate_bytes: int = ROTATE_BYTES, most: int = 8) -> int:
    """How many input sets to rotate over so that the working set passes `rotate_bytes`."""
    if device != "cuda":
        return 1
    return max(1, min(most, math.ceil(rotate_bytes / max(1, state_bytes(state)))))


def input_sets(w, p: dict, dtype: str, device: str, n: int | None = None) -> list:
    """Workload `w`'s inputs at shape params `p`: n sets (where None, as many as make the working
    set pass ROTATE_BYTES on a GPU, n_copies), each from its own setup; the first is the one a
    reference check reads."""
    sets = [w.setup(p, dtype, device)]
    k = n_copies(sets[0], device) if n is None else n
    return sets + [w.setup(p, dtype, device) for _ in range(k - 1)]


def fresh(state):
    """Fresh copies of a state's input tensors; per-state caches ('_' keys) are not carried over
    (a reference must read inputs that no in-place baseline has touched)."""
    import torch

    return {k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in state.items() if not k.startswith("_")}


def first_call_checked(w, variant: str, state, dtype: str):
    """A variant's first call (it compiles: outside any timing) on `state`, checked against the
    reference on fresh copies of the inputs as this call reads them: an in-place variant timed
    before it (RoPE's triton_inplace, Liger's RoPE) has rotated `state`, and this one may rotate
    it too. -> the workload's check result."""
    ref_state = fresh(state)
    out = w.variants[variant](state)
    return w.check(ref_state, variant, out, dtype)


def rotating(fn, states):
    """fn over the states in turn, one per call."""
    i = [0]

    def call():
        s = states[i[0] % len(states)]
        i[0] += 1
        return fn(s)

    return call


def copy_bandwidth(device: str, bench, nbytes: int = COPY_BYTES) -> dict:
    """Device-to-device torch copy: (bytes read + bytes written) / median time."""
    import torch

    nbytes = nbytes if device == "cuda" else 1 << 20

    def timed():  # its buffers are freed when it returns, before empty_cache
        src = torch.empty(nbytes // 2, dtype=torch.bfloat16, device=device).normal_()
        dst = torch.empty_like(src)
        return bench(lambda: dst.copy_(src))

    ms = timed()
    if device == "cuda":
        torch.cuda.empty_cache()
    return {
        "bytes": 2 * nbytes,
        "ms": ms,
        "gbps": 2 * nbytes / ms / 1e6,
        "how": "torch copy_ of a bf16 buffer, (read + written bytes) / do_bench median",
    }


def header(device: str) -> dict:
    """The result header (profkit.core.environment.result_header): date, host, versions, GPU."""
    from profkit.core.environment import result_header

    return result_header(device)


def stamp(info: dict) -> dict:
    """The fields every result row carries: GPU, driver, torch, triton, date."""
    return {
        "gpu": info.get("gpu") or "cpu",
        "driver": info.get("driver"),
        "torch": info.get("torch"),
        "triton": info.get("triton"),
        "date": info.get("date"),
    }


# --- picking a launch configuration on the device it runs on --------------------------------

_TUNED: dict = {}


TUNE_ROTATE_BYTES = 160 << 20  # ~3x an H100 / H200 L2: inputs rotated past it while timing


def rotated(launch, tensors, rotate_bytes: int = TUNE_ROTATE_BYTES, most: int = 4):
    """run(cfg) for `tuned(..., graph=True)`: launch(cfg, *inputs) over copies of `tensors`, one
    set after another (each a program of the tuner's CUDA graph), as many as make ~160 MB, so
    that inputs which would fit the L2 do not favour one candidate. Tuning on one input set
    (RMSNorm backward at 4096 x 4096: 64 MB of x and dy), or after do_bench's 256 MB memset (which
    left ~50 MB of dirty lines for the timed call to write back), picked configurations 1-5 %
    slower by graph replay over rotated inputs on an H200. A copy is contiguous: `launch` must
    read the strides of the tensors it is given. The copies are made at the first run, not
    here: a launcher builds this on every call and the tuner runs it only once per key (made
    eagerly, they cost RoPE at 4096 tokens 4x its time on every call)."""
    nbytes = sum(t.numel() * t.element_size() for t in tensors)
    k = max(1, min(most, -(-rotate_bytes // max(1, nbytes))))
    sets = [tuple(tensors)]
    i = [0]

    def run(cfg):
        if len(sets) < k:
            sets.extend(tuple(t.clone() for t in tensors) for _ in range(k - 1))
        launch(cfg, *sets[i[0] % k])
        i[0] += 1

    return run


_FILL: dict = {}


def fill_l2(device) -> None:
    """Read a buffer of twice the GPU's L2 with plain loads, so that the L2 is full of clean lines
    that are not the workload's, as an earlier op (a decode step's GEMM streaming its weights)
    leaves it. On an NVIDIA H100 80GB HBM3 (2026-11-25) SwiGLU's evict_first launch at one
    token took 1.25 us in a half-empty L2 and 1.51 us in a full one, re-reading its inputs; its
    unhinted launch 1.25 in both. One buffer a GPU ("cuda" and "cuda:0" are one). Twice the
    L2, read once at creation too, so that no dirty line of the buffer's own fill is left to be
    written back inside a timing. No-op off a GPU (a CPU run only checks the plumbing)."""
    import torch

    dev = torch.device(device)
    if dev.type != "cuda":
        return
    idx = torch.cuda.current_device() if dev.index is None else dev.index
    buf = _FILL.get(idx)
    if buf is None:
        n = torch.cuda.get_device_properties(idx).L2_cache_size
        buf = _FILL[idx] = torch.ones(max(1, n // 2), dtype=torch.float32, device=torch.device("cuda", idx))
        buf.sum()
    buf.sum()


def tuning_enabled(device) -> bool:
    """Configs are timed on a CUDA device unless PROFKIT_TUNE=0; the CPU interpreter takes the
    first (default) candidate."""
    import os

    return str(device).startswith("cuda") and os.environ.get("PROFKIT_TUNE", "1") != "0"


def tuned(key, candidates, run, device, warmup_ms: float = 5, rep_ms: float = 25, graph: bool = False):
    """The fastest of `candidates` for `key`: each launched through run(candidate) and timed
    (do_bench median; graph=True: CUDA-graph replay, GPU time only, for launchers whose host
    time would otherwise decide; no L2 flush: `run` should rotate its inputs past the L2 where
    they could fit, as rmsnorm_bwd's does; each candidate timed after fill_l2, in a full L2 as a
    model step leaves it, where an eviction hint shows its cost) once per process;
    later calls with the same key get the cached choice. A candidate that fails to compile or
    launch is skipped. On the CPU, or with PROFKIT_TUNE=0, the first candidate (the default)."""
    if key in _TUNED:
        return _TUNED[key]["config"]
    if (pre := _preset(key)) is not None:
        return pre
    if not tuning_enabled(device) or len(candidates) == 1:
        return candidates[0]
    import torch

    if torch.cuda.is_current_stream_capturing():  # no timing inside a CUDA graph capture
        return candidates[0]
    bench = graph_timer(rep_ms) if graph else timer("cuda", warmup_ms, rep_ms)
    times = {}
    for c in candidates:
        try:
            if graph:
                run(c)  # compiled and warm before the capture
                fill_l2(device)
                times[c] = bench(lambda: run(c))
            else:
                times[c] = bench(lambda: run(c))
        except Exception as e:  # noqa: BLE001  (a config this GPU / Triton cannot compile)
            times[c] = float("inf")
            _TUNED.setdefault("_errors", {}).setdefault(str(key), []).append(f"{c}: {type(e).__name__}")
    best = min(times, key=lambda c: times[c])
    _TUNED[key] = {"config": best, "ms": {str(c): t for c, t in times.items()}}
    return best


def pick_check(key, device):
    """What a launch plan (kernels/_launch.py) made with tuned(key)'s pick keeps to know later that
    the pick still stands (pick_stands): the key and its record. None where no plan should be made
    yet: tuning is on and the pick is not recorded (one taken untimed inside a graph capture, which
    a later call times). key None: the launch takes no tuned pick."""
    entry = None if key is None else _TUNED.get(key)
    if key is not None and entry is None and tuning_enabled(device):
        return None
    return (key, entry)


def pick_stands(check) -> bool:
    """The tuned pick a plan was made with is still the one tuned() would give (compared by
    identity: a pick timed, handed over or cleared since makes a new record; a pick handed over
    by load_tuned after a plan made without one shows as a preset not yet taken)."""
    key, entry = check
    if key is None:
        return True
    got = _TUNED.get(key)
    return got is entry and (got is not None or repr(key) not in _PRESET)


def tuned_cached(key):
    """The cached choice for `key` (timed in this process, or handed over by load_tuned), or None."""
    hit = _TUNED.get(key)
    return hit["config"] if hit else _preset(key)


# Picks handed over from another process (load_tuned): {repr(key): repr(config)}. Why: under a
# profiler every launch is intercepted (ncu serialises and replays them), so timing candidates
# there picks by the profiler's overhead, not the kernel's speed: `profkit capture` of a lab
# workload tunes in a plain run first (dump_tuned) and the profiled run takes those picks.
_PRESET: dict[str, str] = {}


def _preset(key):
    pre = _PRESET.get(repr(key))
    if pre is None:
        return None
    import ast

    config = ast.literal_eval(pre)
    _TUNED[key] = {"config": config, "ms": {"preset": float("nan")}}
    return config


def _autotuners() -> dict:
    """Every triton.autotune'd kernel of the loaded lab modules, by name (module.attribute, or
    module.attribute[key] for the ones kept in a dict): found, not listed by hand."""
    import sys

    from triton.runtime.autotuner import Autotuner

    found = {}
    for mod_name, mod in list(sys.modules.items()):
        if not mod_name.startswith(__name__.rsplit(".", 1)[0] + ".") or mod is None:
            continue
        for attr, val in list(vars(mod).items()):
            if isinstance(val, Autotuner):
                found[f"{mod_name}.{attr}"] = val
            elif isinstance(val, dict):
                for k, v in list(val.items()):
                    if isinstance(v, Autotuner):
                        found[f"{mod_name}.{attr}[{k!r}]"] = v
    return found


def _describe(cfg) -> str:
    return repr((tuple(sorted(cfg.kwargs.items())), cfg.num_warps, cfg.num_stages))


def _literal(text: str) -> bool:
    import ast

    try:
        ast.literal_eval(text)
        return True
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False


def dump_tuned(path) -> dict:
    """Write every pick of this process to `path` (JSON): {"tuned": {repr(key): repr(config)}} for
    tuned() and {"autotune": {kernel: {repr(key): config}}} for the lab's triton.autotune'd kernels
    (their caches); returns it."""
    import json

    picks: dict[str, dict] = {
        "tuned": {repr(k): repr(v["config"]) for k, v in _TUNED.items() if k != "_errors"},
        "autotune": {},
    }
    for name, kernel in _autotuners().items():
        got = {repr(k): _describe(c) for k, c in (getattr(kernel, "cache", None) or {}).items() if _literal(repr(k))}
        if got:
            picks["autotune"][name] = got
    with open(path, "w") as f:
        json.dump(picks, f, indent=1, sort_keys=True)
    return picks


def load_tuned(path) -> int:
    """Take the picks dump_tuned wrote (keys and configs are Python literals): later tuned() calls
    with those keys return them without timing, and the autotuned kernels of the loaded modules
    start with those configs in their caches (matched against each kernel's own configs, pre-hooks
    and all). Returns how many picks were taken."""
    import ast
    import json

    with open(path) as f:
        data = json.load(f)
    if not isinstance(data, dict):
        raise ValueError(f"{path}: not a dump_tuned file")
    tuned, auto = (
        (data.get("tuned", {}), data.get("autotune", {})) if "tuned" in data or "autotune" in data else (data, {})
    )  # the first format: tuned() picks only
    if not (isinstance(tuned, dict) and isinstance(auto, dict)):
        raise ValueError(f"{path}: not a dump_tuned file")
    for k, v in tuned.items():
        if not (isinstance(k, str) and isinstance(v, str)) or not _literal(v):
            raise ValueError(f"{path}: not a dump_tuned file")
    _PRESET.update(tuned)
    n = len(tuned)
    kernels = _autotuners()
    for name, picks in auto.items():
        kernel = kernels.get(name)
        if kernel is None or not isinstance(picks, dict):
            continue  # a kernel this process has not loaded: it tunes itself
        configs = {_describe(c): c for c in kernel.configs}
        for k, desc in picks.items():
            if isinstance(k, str) and _literal(k) and desc in configs:
                kernel.cache[ast.literal_eval(k)] = configs[desc]
                n += 1
    return n


def tuned_choices() -> dict:
    """Every choice made in this process: {key: {"config", "ms" per candidate}} (for result files)."""
    return {str(k): ({"config": str(v["config"]), "ms": v["ms"]} if k != "_errors" else v) for k, v in _TUNED.items()}
