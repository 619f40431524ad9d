"""A user's own Triton kernel, as `profkit tune` takes it (docs/tune.md):

    profkit tune docs/examples/vector_add.py:add_kernel --shape n=16777216 --shape n=1048576

`inputs(shape, device)` builds the inputs of one problem size, `launch(inputs, config)` runs the
kernel with one configuration (its constexprs plus num_warps and num_stages), `reference(inputs)`
gives the expected output (float64 here).
"""
import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(X, Y, Z, n, alpha, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(X + offs, mask=m).to(tl.float32)
    y = tl.load(Y + offs, mask=m).to(tl.float32)
    tl.store(Z + offs, (x + alpha * y).to(Z.dtype.element_ty), mask=m)


def inputs(shape: dict, device: str):
    n = int(shape["n"])
    dtype = getattr(torch, shape.get("dtype", "bfloat16"))
    g = torch.Generator(device="cpu").manual_seed(0)
    x = torch.randn(n, generator=g).to(device=device, dtype=dtype)
    y = torch.randn(n, generator=g).to(device=device, dtype=dtype)
    return x, y, 0.5


def launch(inp, config: dict):
    x, y, alpha = inp
    z = torch.full_like(x, float("nan"))  # poisoned: an element the kernel skips fails the check
    n = x.numel()
    block = config["BLOCK"]
    add_kernel[(triton.cdiv(n, block),)](x, y, z, n, alpha, BLOCK=block, num_warps=config.get("num_warps", 4),
                                         num_stages=config.get("num_stages", 2))
    return z


def reference(inp):
    x, y, alpha = inp
    return x.double() + alpha * y.double()
