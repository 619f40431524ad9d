"""Nsight Compute report (`.ncu-rep`), read through NVIDIA's `ncu_report` module.

Every profiled launch with all its numeric metrics (normalised in profkit.units) and its
NVTX state. `.ncu-rep.xz` is accepted: reports over PyTorch kernels embed their module
(~50 MB) and compress ~40x.
"""
from __future__ import annotations

import lzma
import os
import shutil
import tempfile
from pathlib import Path

from profkit.errors import BadInput, ToolMissing
from profkit.report import Report, ncu_kernel_row
from profkit.units import normalise

FORMAT = "ncu-rep"
NCU_MAGIC = b"NVR\x00"  # first bytes of every .ncu-rep seen (ncu 2025.3)


def recognise(path: Path, head: bytes) -> bool:
    name = path.name.lower()
    if name.endswith((".ncu-rep", ".ncu-rep.xz")):
        return True
    return head.startswith(NCU_MAGIC)


def _load(path: Path):
    try:
        import ncu_report
    except ImportError:
        raise ToolMissing("reading .ncu-rep needs NVIDIA's ncu-report package: pip install ncu-report") from None
    tmp = None
    src = path
    if path.name.lower().endswith(".xz"):
        fd, tmp = tempfile.mkstemp(suffix=".ncu-rep")
        os.close(fd)
        try:
            with lzma.open(path) as fin, open(tmp, "wb") as fout:
                shutil.copyfileobj(fin, fout, 1 << 20)
        except (lzma.LZMAError, EOFError) as e:
            os.unlink(tmp)
            raise BadInput(path, f"broken xz stream ({e})") from None
        src = Path(tmp)
    try:
        ctx = ncu_report.load_report(str(src))
    except Exception as e:  # ncu_report raises plain exceptions for truncated or foreign files
        if tmp:
            os.unlink(tmp)
        raise BadInput(path, f"Nsight Compute could not read the report ({str(e).strip() or type(e).__name__})") from None
    return ctx, tmp  # ncu_report reads lazily: the caller removes tmp when done


def nvtx_path(state) -> tuple[str | None, str | None]:
    """(innermost, path): start/end ranges first (they are process-wide windows), then the
    push/pop stack of the default domain, then those of other domains."""
    se: list[str] = []
    pp: list[str] = []
    for d in sorted(state.domains()):
        dom = state.domain_by_id(d)
        se.extend(dom.start_end_ranges())
        pp.extend(dom.push_pop_ranges())
    names = [n for n in se + pp if n is not None]
    if not names:
        return None, None
    return names[-1], "/".join(names)


def parse(path: Path) -> Report:
    ctx, tmp = _load(path)
    try:
        return _parse(path, ctx)
    finally:
        if tmp:
            os.unlink(tmp)


def _parse(path: Path, ctx) -> Report:
    kernels, counters = [], []
    facts: dict = {}
    seq = 0
    for ri in range(ctx.num_ranges()):
        rng = ctx.range_by_idx(ri)
        for ai in range(rng.num_actions()):
            a = rng.action_by_idx(ai)
            values = {}
            for name in a.metric_names():
                m = a.metric_by_name(name)
                if m is None or not m.has_value() or m.kind() == m.ValueKind_STRING:
                    continue
                try:
                    v = m.as_double()
                except Exception:
                    continue
                if v != v:  # NaN
                    continue
                values[name] = normalise(v, m.unit())
            if "gpu__time_duration.sum" not in values and not values:
                continue
            inner, path_ = nvtx_path(a.nvtx_state())
            kernels.append(ncu_kernel_row(seq, a.name(a.NameBase_DEMANGLED), a.name(), inner, path_, values))
            counters.extend((seq, k, u, v) for k, (v, u) in values.items())
            if not facts:
                dn = a.metric_by_name("device__attribute_display_name")
                sms = values.get("device__attribute_multiprocessor_count")
                facts = {"gpu_name": dn.as_string() if dn is not None else None, "sm_count": sms and int(sms[0])}
            seq += 1
    if not kernels:
        raise BadInput(path, "the report holds no profiled kernel (truncated or empty?)")
    return Report(str(path), FORMAT, "ncu", kernels, [], counters, {k: v for k, v in facts.items() if v})
