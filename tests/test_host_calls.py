"""Host calls and GPU memory operations (the idle causes' sources) from each timeline format,
on real traces: a torch.profiler trace (H100), profkit's CUPTI trace (H200)."""
from collections import Counter

from profdata import DATA
from profkit.parsers import cupti_trace, kineto

from profkit.core.hostcalls import host_kind

TF = DATA / "kineto-h100" / "tf.kineto.json.gz"
CUPTI = DATA / "rmsnorm-cupti" / "rmsnorm-cupti.cupti.jsonl"


def test_only_the_idle_kinds_are_kept():
    assert host_kind("cudaStreamSynchronize") == "sync" and host_kind("cuLibraryLoadData") == "module"
    assert host_kind("cudaMalloc") == "alloc" and host_kind("cudaMemcpyAsync") == "memcpy"
    assert host_kind("cudaLaunchKernel") is None and host_kind("cuGetProcAddress") is None
    assert host_kind("cudaGetDevice") is None


def test_a_torch_profiler_trace_gives_its_syncs_and_pageable_copies():
    rep = kineto.parse(TF)
    calls = Counter((h[0], h[1]) for h in rep.host_calls)
    assert calls[("sync", "cudaStreamSynchronize")] >= 1 and calls[("memcpy", "cudaMemcpyAsync")] >= 1
    assert all(host_kind(name) == kind for kind, name in calls)
    copies = Counter((g[0], g[1], g[3]) for g in rep.gpu_copies)
    assert copies[("memcpy", "DtoH", 1)] >= 1 and copies[("memset", "device", 0)] >= 1
    assert all(g[5] >= g[4] for g in rep.gpu_copies)


def test_profkits_cupti_trace_gives_its_module_loads_and_syncs():
    rep = cupti_trace.parse(CUPTI)
    calls = Counter((h[0], h[1]) for h in rep.host_calls)
    assert calls[("module", "cuLibraryLoadData")] >= 1 and calls[("sync", "cudaDeviceSynchronize")] >= 1
    assert not any(name.startswith("cudaGetDevice") for _, name in calls)
    assert rep.gpu_copies == []
