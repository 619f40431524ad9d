"""Build a Gluon kernel of the lab for an H100 (sm_90a) without a GPU, as the tests of the
warp-specialized fp8 GEMMs do (Gluon has no interpreter): triton.compile in a child process (the
kernel tests run under TRITON_INTERPRET=1), then ptxas -v. -> what the tests assert on: ptxas'
return code and tail, the PTX wgmma count of each shape, the setmaxnreg register counts,
serialized-wgmma warnings (C751x), spill bytes and the shared memory; or pytest.skip where this
Triton cannot build Gluon for sm_90."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

_CHILD = textwrap.dedent("""
    import importlib, json, re, subprocess, sys, tempfile
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.backends.nvidia.compiler import get_ptxas
    from triton.experimental.gluon._runtime import GluonASTSource
    from triton.experimental.gluon import language as gl
    module, fn, sig, cx = json.loads(sys.argv[1])
    m = importlib.import_module(module)
    def desc(dt, shape):  # a TMA descriptor over the default shared layout, as the lab's kernels make them
        lay = gl.NVMMASharedLayout.get_default_for(shape, {"fp8e4nv": gl.float8e4nv, "bf16": gl.bfloat16}[dt])
        return f"tensordesc<{dt}[{shape[0]}, {shape[1]}],{lay!r}>"
    sig = {k: desc(*v) if isinstance(v, list) else v for k, v in sig.items()}
    sig.update({n: "constexpr" for n in cx})
    k = triton.compile(GluonASTSource(fn=getattr(m, fn), signature=sig, constexprs=cx),
                       target=GPUTarget("cuda", 90, 32), options={"num_warps": 4})
    ptx = k.asm["ptx"]
    with tempfile.TemporaryDirectory() as d:
        open(d + "/k.ptx", "w").write(ptx)
        r = subprocess.run([get_ptxas(90).path, "-arch=sm_90a", "-v", d + "/k.ptx", "-o", d + "/k.cubin"],
                           capture_output=True, text=True)
    print(json.dumps(dict(
        rc=r.returncode, err=r.stderr[-400:],
        wgmma={s: len(re.findall(r"wgmma\\.mma_async\\.sync\\.aligned\\." + s + r"\\.", ptx))
               for s in set(re.findall(r"wgmma\\.mma_async\\.sync\\.aligned\\.(m64n\\d+k32)\\.f32\\.e4m3", ptx))},
        regs=sorted({int(x) for x in re.findall(r"setmaxnreg\\.(?:inc|dec)\\.sync\\.aligned\\.u32\\s+(\\d+)", ptx)}),
        serialized=re.findall(r"C751\\d", r.stderr), spills=re.findall(r"(\\d+) bytes spill stores", r.stderr),
        shared=k.metadata.shared)))
""")


def build_sm90(module: str, fn: str, signature: dict, constexprs: dict) -> dict:
    """module.fn compiled for sm_90a (see the module docstring). signature: name -> Triton type
    ("*fp32", "i32"), or [dtype, block shape] for a TMA descriptor ("fp8e4nv", "bf16")."""
    import pytest

    r = subprocess.run([sys.executable, "-c", _CHILD, json.dumps([module, fn, signature, constexprs])],
                       capture_output=True, text=True, env={**os.environ, "TRITON_INTERPRET": "0"}, timeout=600)
    if r.returncode and ("gluon" in r.stderr.lower() and "No module" in r.stderr or "GPUTarget" in r.stderr
                         or "get_ptxas" in r.stderr):
        pytest.skip(f"this Triton cannot build Gluon for sm_90 here: {r.stderr.strip().splitlines()[-1]}")
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout.strip().splitlines()[-1])
