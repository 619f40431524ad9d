"""Element sizes of the dtypes the model sees: the lab's short names and the type strings a
torch.profiler trace records in "Input type" (c10's scalar type names)."""

from __future__ import annotations

ESIZE = {"fp8": 1, "fp16": 2, "bf16": 2, "fp32": 4, "fp64": 8}

# "Input type" strings of torch.profiler (c10::ScalarType names, and the C++ names record_shapes
# writes for the basic types) -> (short name, bytes)
_TRACE_TYPES = {
    "c10::BFloat16": ("bf16", 2),
    "c10::Half": ("fp16", 2),
    "float": ("fp32", 4),
    "double": ("fp64", 8),
    "c10::Float8_e4m3fn": ("fp8", 1),
    "c10::Float8_e5m2": ("fp8", 1),
    "c10::Float8_e4m3fnuz": ("fp8", 1),
    "c10::Float8_e5m2fnuz": ("fp8", 1),
    "long int": ("int64", 8),
    "int": ("int32", 4),
    "short int": ("int16", 2),
    "signed char": ("int8", 1),
    "unsigned char": ("uint8", 1),
    "bool": ("bool", 1),
    "c10::complex<float>": ("complex64", 8),
    "c10::complex<double>": ("complex128", 16),
    # nsys autograd-shapes NVTX and torch.utils names
    "bfloat16": ("bf16", 2),
    "float16": ("fp16", 2),
    "half": ("fp16", 2),
    "float32": ("fp32", 4),
    "float64": ("fp64", 8),
    "int64": ("int64", 8),
    "int32": ("int32", 4),
    "uint8": ("uint8", 1),
    "int8": ("int8", 1),
    "float8_e4m3fn": ("fp8", 1),
    "float8_e5m2": ("fp8", 1),
}
for _k, (_n, _b) in list(_TRACE_TYPES.items()):
    _TRACE_TYPES.setdefault(_n, (_n, _b))
_TRACE_TYPES.update({"fp8": ("fp8", 1), "fp16": ("fp16", 2), "bf16": ("bf16", 2), "fp32": ("fp32", 4)})


def short(type_name: str | None) -> str | None:
    """The short dtype name of a trace's type string (None: not a tensor type we know)."""
    t = _TRACE_TYPES.get((type_name or "").replace("torch.", ""))
    return t[0] if t else None


def size(type_name: str | None) -> int | None:
    """Bytes per element of a trace's type string or a short name (None: unknown)."""
    t = _TRACE_TYPES.get((type_name or "").replace("torch.", ""))
    return t[1] if t else None
