"""A mangled kernel name libstdc++ will not demangle still gets its function's name: cuDNN's CUTLASS
weight-gradient convolutions carry a template literal of enum type that __cxa_demangle refuses
(status -2) in a real torch.profiler trace of a ResNet-18 step (H100, torch 2.11, 2026-12-05), where
ncu's report of the same launches names them `Kernel`."""
import gzip
import json

from profdata import DATA

from profkit.core import names


def _refused() -> list[str]:
    with gzip.open(DATA / "opmodel-h100" / "resnet18-step3.kineto.json.gz", "rt") as f:
        trace = json.load(f)
    got = {e["name"] for e in trace["traceEvents"] if e.get("cat") == "kernel" and e["name"].startswith("_Z")}
    return sorted(n for n in got if names.demangle(n) == n)


def test_a_name_libstdcxx_refuses_still_has_its_function_name():
    refused = _refused()
    assert refused, "the trace holds names libstdc++ refuses"
    for n in refused:
        assert n.startswith("_ZN17cutlass__5x_cudnn6KernelI")
        assert names.short_name(names.demangle(n)) == "Kernel"


def test_the_reading_stops_where_the_name_does():
    assert names.mangled_base("_Z13vector_add_f4PKfS0_Pfi") == "vector_add_f4"
    assert names.mangled_base("_ZN2at6native29vectorized_elementwise_kernelILi4EEEvi") == "vectorized_elementwise_kernel"
    assert names.mangled_base("_Z99x") is None  # a length past the name's end
    assert names.short_name("_ZNK3foo3barEv") == "_ZNK3foo3barEv"  # not read: a qualifier first
