"""Host calls the idle causes need (profkit.analyses.idle), named alike by every parser: a CUDA
runtime or driver call's kind (sync, alloc, module, memcpy, memset) from its name."""

from __future__ import annotations

import re

# host calls kept for the idle causes (profkit.analyses.idle), by kind; names without nsys's
# version suffix (_v3020). Only these: exports hold millions of other runtime and driver calls
_HOST_KINDS = (
    ("sync", re.compile(r"^cu(da)?(Stream|Device|Ctx|Event)Synchronize$|^cudaThreadSynchronize$")),
    (
        "alloc",
        re.compile(
            r"^(cudaMalloc|cudaFree|cudaHostAlloc|cudaMallocHost|cudaFreeHost|cudaHostRegister|"
            r"cudaHostUnregister|cuMemAlloc|cuMemFree|cuMemHostAlloc|cuMemFreeHost|cuMemCreate|"
            r"cuMemRelease|cuMemMap|cuMemUnmap|cuMemAddressReserve|cuMemAddressFree|cuMemHostRegister|"
            r"cuMemHostUnregister)\w*$"
        ),
    ),
    # loading and linking code; not the per-launch lookups (cuLibraryGetKernel, cuModuleGetFunction),
    # which a steady loop calls every step in microseconds and which would take its launch gaps
    (
        "module",
        re.compile(
            r"^(cuModuleLoad|cuModuleUnload|cuLibraryLoad|cuLibraryUnload|"
            r"cuLinkCreate|cuLinkAddData|cuLinkAddFile|cuLinkComplete)\w*$"
        ),
    ),
    ("memcpy", re.compile(r"^cu(da)?Memcpy\w*$")),
    ("memset", re.compile(r"^cu(da)?Memset\w*$")),
)
HOST_KINDS = tuple(k for k, _ in _HOST_KINDS)


def host_kind(name: str) -> str | None:
    """The idle-cause kind of a CUDA runtime or driver call (its version suffix dropped), or None."""
    for kind, pat in _HOST_KINDS:
        if pat.match(name):
            return kind
    return None


def call_name(name: str) -> str:
    return re.sub(r"_v\d+$", "", name)
