"""Kernel names: the short (base function) name of a demangled C++ kernel name, and what a
name says about the kernel (an NCCL collective is communication, not computation); any name
as storable text (as_text)."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import re
from functools import cache, lru_cache

MAX_NAME = 1 << 20  # characters of one kernel or range name: real ones are under ~10 K (C++ templates)


def name_too_long(v: str) -> str:
    """The one line refusing a file with a name over MAX_NAME."""
    return (
        f"a kernel or range name of {len(v):,} characters ({v[:40]!r}...): over profkit's limit "
        f"of {MAX_NAME:,} for one name (a hostile or corrupt file)"
    )


@cache
def _cxa_demangle():
    lib = ctypes.util.find_library("stdc++")
    if not lib:
        return None
    try:
        f = ctypes.CDLL(lib).__cxa_demangle
    except (OSError, AttributeError):
        return None
    f.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_int)]
    f.restype = ctypes.c_void_p
    return f


@lru_cache(maxsize=65536)
def demangle(name: str) -> str:
    """Itanium C++ demangling through libstdc++ (as CUPTI hands out mangled names)."""
    if not name.startswith("_Z"):
        return name
    f = _cxa_demangle()
    if f is None:
        return name
    status = ctypes.c_int()
    ptr = f(name.encode(), None, None, ctypes.byref(status))
    if status.value != 0 or not ptr:
        return name
    try:
        return ctypes.string_at(ptr).decode(errors="replace")
    finally:
        ctypes.CDLL(None).free(ctypes.c_void_p(ptr))


_ANON = re.compile(r"\(anonymous namespace\)|<?\bunnamed>")
_SOURCE_NAME = re.compile(r"(\d+)")


def mangled_base(name: str) -> str | None:
    """The function's own name read from an Itanium-mangled name that did not demangle
    (libstdc++ refuses some template literals of enum type that cuDNN's CUTLASS kernels carry):
    the last source name of `_Z[N]<len><id>...` before its template arguments or its end."""
    i = 3 if name.startswith("_ZN") else 2
    last = None
    while i < len(name) and name[i].isdigit():
        m = _SOURCE_NAME.match(name, i)
        assert m is not None
        n, start = int(m.group(1)), m.end()
        if n <= 0 or start + n > len(name):
            return last
        last, i = name[start : start + n], start + n
    return last


def short_name(demangled: str) -> str:
    """'void at::native::foo<int, 4>(float*, int)' -> 'foo'; plain names pass through; a mangled
    name that did not demangle gives its function's name where it can be read."""
    if demangled.startswith("_Z"):
        return mangled_base(demangled) or demangled
    # an anonymous namespace, as demanglers print it and as ncu's CSV pages do ("unnamed>::",
    # its '<' lost): its angle bracket or parenthesis would unbalance the scan below
    s = _ANON.sub("anon", demangled.strip())
    # drop the parameter list: the last top-level '(...)'
    depth, cut = 0, len(s)
    for i in range(len(s) - 1, -1, -1):
        ch = s[i]
        if ch == ")":
            depth += 1
        elif ch == "(":
            depth -= 1
            if depth == 0:
                cut = i
                break
    s = s[:cut]
    # drop trailing template arguments
    if s.endswith(">"):
        depth = 0
        for i in range(len(s) - 1, -1, -1):
            if s[i] == ">":
                depth += 1
            elif s[i] == "<":
                depth -= 1
                if depth == 0:
                    s = s[:i]
                    break
    # the name is the last token after spaces (return type) and '::' (namespaces)
    s = s.split(" ")[-1] if " " in s else s
    return s.split("::")[-1] or demangled


COMM_PREFIXES = ("nccl",)  # ncclKernel_*, ncclDevKernel_* (all NCCL versions), case-insensitive


def is_comm(name: str | None) -> bool:
    """An NCCL collective: its time is set by the other ranks and the links (HTA's split)."""
    if not name:
        return False
    return name.lower().startswith(COMM_PREFIXES)


def report_text(v) -> str | None:
    """A name a report holds, as text: a corrupt row may hold a blob or a number where the tool
    writes text. One rule for the row path (the parser reads the names) and the column path
    (the store reads them from the attached report)."""
    if v is None or isinstance(v, str):
        return v
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)


def as_text(value) -> str:
    """A name (str, bytes or path) as text SQLite can store and a terminal can show. File names
    and command-line arguments are bytes underneath; bytes that are not UTF-8 (which Python keeps
    as lone surrogates) become \\xNN escapes instead of failing at the first insert or print."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "backslashreplace")
    s = str(os.fspath(value)) if isinstance(value, os.PathLike) else str(value)
    if s.isascii():
        return s
    try:
        s.encode("utf-8")
        return s
    except UnicodeEncodeError:
        return s.encode("utf-8", "surrogateescape" if _only_escapes(s) else "backslashreplace").decode(
            "utf-8", "backslashreplace"
        )


def _only_escapes(s: str) -> bool:
    return all(not 0xD800 <= ord(c) <= 0xDFFF or 0xDC80 <= ord(c) <= 0xDCFF for c in s)
