"""PyTorch operators as a trace records them -> the operator model's FLOPs and minimum bytes.

An operator comes as its name (``aten::addmm``) and its inputs in order, each an Operand: a
tensor's dims and dtype, a scalar's concrete value (torch.profiler's ``record_shapes``: "Input
Dims", "Input type", "Concrete Inputs"), or a tensor list. ``estimate`` picks the family's
formula (profkit/model/ops/<family>.py); None with the reason where the inputs do not say
enough. Shape conventions are aten's own signatures (native_functions.yaml).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from math import prod
from typing import Any

from . import (
    attention,
    collectives,
    conv,
    elementwise,
    embedding,
    memory,
    norms,
    optimizers,
    pooling,
    reductions,
    softmax,
)
from .dtypes import short, size


@dataclass(frozen=True)
class Operand:
    dims: tuple[int, ...] | None = None  # a tensor's sizes; None: not a tensor (or not recorded)
    dtype: str | None = None  # the trace's type string (c10::BFloat16, float, Scalar ...)
    value: str | None = None  # a scalar's concrete value, as recorded
    items: tuple[Operand, ...] | None = None  # a tensor list's tensors (when recorded)
    strides: tuple[int, ...] | None = None  # its strides where recorded ("Input Strides")

    @property
    def tensor(self) -> bool:
        return self.dims is not None and size(self.dtype) is not None

    @property
    def shape(self) -> tuple[int, ...]:
        return self.dims if self.dims is not None else ()

    @property
    def numel(self) -> int:
        return prod(self.dims) if self.dims is not None else 0

    @property
    def esize(self) -> int:
        return size(self.dtype) or 0

    @property
    def stored(self) -> int:
        """Elements in its storage: a dim of stride 0 (an expand or broadcast view) is one element
        read for all its positions."""
        if self.dims is None:
            return 0
        if self.strides is None or len(self.strides) != len(self.dims):
            return self.numel
        return prod(d for d, st in zip(self.dims, self.strides) if st != 0)

    @property
    def nbytes(self) -> int:
        """Bytes of its storage: what reading it moves at least."""
        if self.items:
            return sum(i.nbytes for i in self.items)
        return self.stored * self.esize if self.tensor else 0


def operands(dims, types, concrete=None, strides=None) -> list[Operand]:
    """Operands from torch.profiler's "Input Dims", "Input type", "Concrete Inputs" and "Input
    Strides"."""
    out = []
    dims, types = list(dims or ()), list(types or ())
    concrete, strides = list(concrete or ()), list(strides or ())
    for i, d in enumerate(dims):
        t = types[i] if i < len(types) else None
        v = concrete[i] if i < len(concrete) and concrete[i] != "" else None
        st = strides[i] if i < len(strides) else None
        st = tuple(int(x) for x in st) if isinstance(st, list) and all(isinstance(x, int) for x in st) else None
        if isinstance(d, list) and d and all(isinstance(x, list) for x in d):
            out.append(Operand(None, t, v, tuple(Operand(tuple(x), None) for x in d)))
        elif isinstance(d, list) and (d or size(t) is not None):
            out.append(Operand(tuple(int(x) for x in d), t, v, None, st))
        else:
            out.append(Operand(None, t, v))
    return out


@dataclass(frozen=True)
class Estimate:
    family: str
    flops: float
    bytes: float
    dtype: str | None = None  # the precision of the arithmetic (short name)
    note: str = ""  # an assumption the numbers rest on
    bus: bool = False  # bytes over links (a collective), not DRAM


# aten ScalarType numbers (c10/core/ScalarType.h) -> bytes: the dtype argument of to/_to_copy
_SCALAR_TYPES = {0: 1, 1: 1, 2: 2, 3: 4, 4: 8, 5: 2, 6: 4, 7: 8, 11: 1, 15: 2, 23: 1, 24: 1, 25: 1, 26: 1}


def _val(o: Operand | None, default=None):
    if o is None or o.value is None:
        return default
    try:
        return ast.literal_eval(o.value)
    except (ValueError, SyntaxError):
        return default


def _tensors(ins: list[Operand]) -> list[Operand]:
    return [o for o in ins if o.tensor]


def _broadcast(shapes) -> tuple[int, ...]:
    n = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(n):
        sizes = [s[len(s) - n + i] for s in shapes if len(s) - n + i >= 0]
        out.append(max(sizes) if sizes else 1)
    return tuple(out)


def _matmul_dims(a: tuple, b: tuple) -> tuple[int, int, int, int] | None:
    """(batch, M, N, K) of torch.matmul's broadcasting rules."""
    if not a or not b:
        return None
    a2 = (1,) + a if len(a) == 1 else a
    b2 = b + (1,) if len(b) == 1 else b
    if a2[-1] != b2[-2]:
        return None
    batch = prod(_broadcast([a2[:-2], b2[:-2]]))
    return batch, a2[-2], b2[-1], a2[-1]


def _gemm(
    family_op: str,
    batch: int,
    m: int,
    n: int,
    k: int,
    ins: list[Operand],
    out_e: int | None = None,
    extra_read: int = 0,
    epilogue: int = 0,
) -> Estimate:
    t = _tensors(ins)
    e = t[0].esize if t else 2
    a_e = t[0].esize if t else e
    b_e = t[1].esize if len(t) > 1 else a_e
    oe = out_e or e
    byt = batch * (m * k * a_e + k * n * b_e + m * n * oe) + extra_read
    return Estimate("matmul", 2 * batch * m * n * k + epilogue, byt, short(t[0].dtype) if t else None)


def _matmul(name: str, ins: list[Operand]) -> Estimate | None:
    t = _tensors(ins)
    if name == "mm" and len(t) >= 2:
        (m, k), (_, n) = t[0].shape[-2:], t[1].shape[-2:]
        return _gemm(name, 1, m, n, k, ins)
    if name == "addmm" and len(t) >= 3:
        bias, a, b = t[0], t[1], t[2]
        (m, k), n = a.shape, b.shape[-1]
        return _gemm(name, 1, m, n, k, [a, b], extra_read=bias.nbytes, epilogue=m * n)
    if name in ("bmm", "baddbmm") and len(t) >= 2:
        a, b = (t[1], t[2]) if name == "baddbmm" and len(t) >= 3 else (t[0], t[1])
        bt, m, k = a.shape
        n = b.shape[-1]
        extra = t[0].nbytes if name == "baddbmm" and len(t) >= 3 else 0
        return _gemm(name, bt, m, n, k, [a, b], extra_read=extra, epilogue=bt * m * n if extra else 0)
    if name == "linear" and len(t) >= 2:
        x, w = t[0], t[1]
        m, k, n = prod(x.shape[:-1]), x.shape[-1], w.shape[0]
        lin_bias = t[2] if len(t) > 2 else None
        return _gemm(
            name, 1, m, n, k, [x, w], extra_read=lin_bias.nbytes if lin_bias else 0, epilogue=m * n if lin_bias else 0
        )
    if name == "matmul" and len(t) >= 2:
        d = _matmul_dims(t[0].shape, t[1].shape)
        if d:
            return _gemm(name, *d, ins=[t[0], t[1]])
    if name in ("_scaled_mm", "_scaled_mm_v2") and len(t) >= 2:
        (m, k), n = t[0].shape, t[1].shape[-1]
        scales = sum(o.nbytes for o in t[2:])
        est = _gemm(name, 1, m, n, k, t[:2], out_e=2, extra_read=scales)
        return Estimate("matmul", est.flops, est.bytes, "fp8", "bf16 output assumed")
    if name in ("_grouped_mm", "_scaled_grouped_mm") and len(t) >= 2:
        a, b = t[0], t[1]
        if len(a.shape) == 2 and len(b.shape) == 3:  # a [total_M, K] ragged over groups, b [G, K, N]
            mt, k = a.shape
            n = b.shape[-1]
            byt = a.nbytes + b.nbytes + mt * n * 2
            return Estimate("matmul", 2 * mt * n * k, byt, short(a.dtype), "groups split M")
        if len(a.shape) == 3 and len(b.shape) == 3:
            g, m, k = a.shape
            n = b.shape[-1]
            return _gemm(name, g, m, n, k, [a, b])
    return None


# (stride, padding, dilation, groups, output_padding) argument indices of each aten signature
_CONV_ARGS: dict[str, tuple[int, int, int, int, int | None]] = {
    "convolution": (
        3,
        4,
        5,
        8,
        7,
    ),  # (input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)
    "_convolution": (3, 4, 5, 8, 7),
    "conv1d": (3, 4, 5, 6, None),  # (input, weight, bias, stride, padding, dilation, groups)
    "conv2d": (3, 4, 5, 6, None),
    "conv3d": (3, 4, 5, 6, None),
    "conv_transpose1d": (3, 4, 7, 6, 5),  # (input, weight, bias, stride, padding, output_padding, groups, dilation)
    "conv_transpose2d": (3, 4, 7, 6, 5),
    "conv_transpose3d": (3, 4, 7, 6, 5),
    "cudnn_convolution": (3, 2, 4, 5, None),  # (self, weight, padding, stride, dilation, groups, ...)
    "cudnn_convolution_transpose": (4, 2, 5, 6, 3),  # (self, weight, padding, output_padding, stride, dilation, groups)
    "mkldnn_convolution": (4, 3, 5, 6, None),  # (self, weight, bias, padding, stride, dilation, groups)
    "miopen_convolution": (4, 3, 5, 6, None),
}


def _conv(name: str, ins: list[Operand]) -> Estimate | None:
    t = _tensors(ins)
    if name.endswith("backward"):
        # convolution_backward(grad_out, input, weight, bias_sizes, stride, padding, dilation,
        # transposed, output_padding, groups, output_mask)
        if len(t) < 3:
            return None
        go, x, w = t[0], t[1], t[2]
        mask = _val(ins[10], [True, True, True]) if len(ins) > 10 else [True, True, True]
        transposed = bool(_val(ins[7], False)) if len(ins) > 7 else False
        d = conv.conv_backward(go.shape, x.shape, w.shape, x.esize, tuple(bool(m) for m in mask), transposed)
        return Estimate("conv", d["flops"], d["bytes"], short(x.dtype))
    shaped = _conv_shapes(name, ins)
    if shaped is None:
        return None
    x, w, out, bias, transposed, note = shaped
    d = conv.conv_forward(x.shape, w.shape, out, x.esize, bias, transposed)
    return Estimate("conv", d["flops"], d["bytes"], short(x.dtype), note)


def _conv_shapes(name: str, ins: list[Operand]) -> tuple[Operand, Operand, list[int], bool, bool, str] | None:
    """(input, weight, output dims, has bias, transposed, note) of a forward convolution."""
    t = _tensors(ins)
    if len(t) < 2:
        return None
    x, w = t[0], t[1]
    bias = len(t) > 2 and len(t[2].shape) == 1
    nsp = len(x.shape) - 2
    # argument positions (stride, padding, dilation, groups, output_padding) by aten signature: the
    # backend ops put padding before stride (cudnn_convolution has no bias)
    at = _CONV_ARGS.get(name, _CONV_ARGS["convolution"])

    def arg(i, default):
        return _val(ins[i], default) if i is not None and len(ins) > i else default

    stride = arg(at[0], [1] * nsp)
    padding = arg(at[1], [0] * nsp)
    dilation = arg(at[2], [1] * nsp)
    note = "" if len(ins) > at[0] and ins[at[0]].value is not None else "stride 1, no padding assumed (not recorded)"
    if isinstance(padding, str):  # conv2d(..., padding="same")
        padding = [(dilation[i] * (w.shape[2 + i] - 1)) // 2 for i in range(nsp)] if padding == "same" else [0] * nsp
    stride, padding, dilation = ([v] * nsp if isinstance(v, int) else list(v) for v in (stride, padding, dilation))
    transposed = "transpose" in name or (name in ("convolution", "_convolution") and bool(arg(6, False)))
    outp = arg(at[4], None) if transposed else None
    groups = arg(at[3], 1)
    sp = conv.out_spatial(x.shape[2:], w.shape[2:], stride, padding, dilation, transposed, outp)
    c_out = w.shape[1] * (groups if isinstance(groups, int) else 1) if transposed else w.shape[0]
    return x, w, [x.shape[0], c_out, *sp], bias, transposed, note


_ATTN_FWD = {
    "scaled_dot_product_attention",
    "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_efficient_attention",
    "_scaled_dot_product_cudnn_attention",
    "_scaled_dot_product_flash_attention_for_cpu",
    "_cudnn_attention_forward",
    "_scaled_dot_product_attention_math",
    "_fused_sdp_choice",
}
_ATTN_BWD = {
    "_scaled_dot_product_flash_attention_backward",
    "_scaled_dot_product_efficient_attention_backward",
    "_scaled_dot_product_cudnn_attention_backward",
    "_cudnn_attention_backward",
    "_scaled_dot_product_flash_attention_for_cpu_backward",
}
# the argument that says is_causal, by operator (aten signatures)
_CAUSAL_ARG = {
    "scaled_dot_product_attention": 5,
    "_scaled_dot_product_flash_attention": 4,
    "_scaled_dot_product_efficient_attention": 5,
    "_scaled_dot_product_cudnn_attention": 6,
    "_cudnn_attention_forward": 10,
    "_scaled_dot_product_flash_attention_for_cpu": 4,
    "_scaled_dot_product_attention_math": 5,
}


def _causal_note(lq: int, lk: int) -> str:
    return f"causal: {100 * attention.causal_share(lq, lk):.1f} % of the square (whole 128-row tiles)"


def _causal(name: str, ins: list[Operand]) -> bool:
    i = _CAUSAL_ARG.get(name)
    if i is not None and i < len(ins):
        return bool(_val(ins[i], False))
    # backward signatures: the first bool after the scalar arguments that follows dropout_p
    vals = [o.value for o in ins if o.value in ("True", "False")]
    return vals[0] == "True" if vals else False


def _attention(name: str, ins: list[Operand]) -> Estimate | None:
    t = _tensors(ins)
    if len(t) < 3:
        return None
    if name in (
        "_flash_attention_forward",
        "_flash_attention_backward",
        "_efficient_attention_forward",
        "_efficient_attention_backward",
    ):
        # [B, L, H, E] layout, or varlen [total, H, E] with cu_seqlens
        back = name.endswith("backward")
        q, k, v = (t[1], t[2], t[3]) if back and len(t) >= 4 else (t[0], t[1], t[2])
        if len(q.shape) == 4:
            b, lq, h, e = q.shape
            lk, hk, ev = k.shape[1], k.shape[2], v.shape[3]
            note = ""
            share = None
        elif len(q.shape) == 3:  # varlen: per-sequence lengths are not recorded; max length bounds
            tq, h, e = q.shape
            tk, hk, ev = k.shape[0], k.shape[1], v.shape[2]
            maxk = next((_val(o) for o in ins if isinstance(_val(o), int) and _val(o) > 1), None)
            b, lq, lk = 1, tq, min(tk, maxk or tk)
            note = "varlen: total tokens x the longest key sequence (an upper bound)"
            share = attention.causal_share(lk, lk)  # the longest sequence's own square
        else:
            return None
        fn = attention.backward if back else attention.forward
        d = fn(b, h, lq, lk, e, ev, q.esize, _causal(name, ins), hk, share)
        return Estimate("attention", d["flops"], d["bytes"], short(q.dtype), note)
    back = name in _ATTN_BWD
    if back:
        q, k, v = t[1], t[2], t[3]  # (grad_out, query, key, value, out, logsumexp, ...)
    else:
        q, k, v = t[0], t[1], t[2]
    if len(q.shape) < 3:
        return None
    *bh, lq, e = q.shape
    lk, ev = k.shape[-2], v.shape[-1]
    h = bh[-1] if bh else 1
    b = prod(bh[:-1]) if len(bh) > 1 else 1
    hk = k.shape[-3] if len(k.shape) >= 3 else h
    fn = attention.backward if back else attention.forward
    causal = _causal(name, ins)
    d = fn(b, h, lq, lk, e, ev, q.esize, causal, hk)
    return Estimate("attention", d["flops"], d["bytes"], short(q.dtype), _causal_note(lq, lk) if causal else "")


def _norm(name: str, ins: list[Operand]) -> Estimate | None:
    t = _tensors(ins)
    if not t:
        return None
    x = t[0]
    e = x.esize
    if name in ("layer_norm", "native_layer_norm", "rms_norm", "_fused_rms_norm"):
        normalized = _val(ins[1], None) if len(ins) > 1 else None
        n = prod(normalized) if isinstance(normalized, (list, tuple)) else x.shape[-1]
        groups = x.numel // max(n, 1)
        w = [o for o in t[1:] if o.shape and prod(o.shape) == n]
        rms = "rms" in name
        d = norms.norm_forward(
            x.numel,
            n,
            groups,
            e,
            flops_per=4 if rms else 5,
            affine=bool(w),
            bias=len(w) > 1,
            stats=name.startswith(("native", "_fused")),
        )
        return Estimate("norm", d["flops"], d["bytes"], short(x.dtype))
    if name in ("native_layer_norm_backward", "_fused_rms_norm_backward"):
        go, x = t[0], t[1]
        n = x.shape[-1]
        w = [o for o in t[2:] if o.shape and len(o.shape) == 1 and o.shape[0] == n]
        d = norms.norm_backward(x.numel, n, x.numel // max(n, 1), e, flops_per=8, affine=bool(w))
        return Estimate("norm", d["flops"], d["bytes"], short(x.dtype))
    if name in ("group_norm", "native_group_norm"):
        c = x.shape[1] if len(x.shape) > 1 else 1
        g = _val(ins[6], None) if name == "native_group_norm" and len(ins) > 6 else _val(ins[1], 1)
        groups = x.shape[0] * (g if isinstance(g, int) else 1)
        d = norms.norm_forward(x.numel, c, groups, e, flops_per=5, affine=len(t) > 1)
        return Estimate("norm", d["flops"], d["bytes"], short(x.dtype))
    if name == "native_group_norm_backward":
        go, x = t[0], t[1]
        c = x.shape[1]
        d = norms.norm_backward(x.numel, c, x.shape[0], e, flops_per=8)
        return Estimate("norm", d["flops"], d["bytes"], short(x.dtype))
    if name in (
        "batch_norm",
        "native_batch_norm",
        "cudnn_batch_norm",
        "_batch_norm_impl_index",
        "_native_batch_norm_legit",
        "_native_batch_norm_legit_no_training",
        "miopen_batch_norm",
    ):
        c = x.shape[1] if len(x.shape) > 1 else x.shape[0]
        d = norms.norm_forward(x.numel, c, c, e, flops_per=5, affine=True)
        # training: a channel's statistics span the whole batch, so no output can be written
        # before all of x is read; an activation outgrows the SMs' storage, so x is read twice
        # (statistics, then normalisation; H100 ncu: 2.0x the one-read model on every ResNet-18 one)
        if name != "_native_batch_norm_legit_no_training" and len(ins) > 5 and _val(ins[5]) is True:
            return Estimate("norm", d["flops"], d["bytes"] + x.nbytes, short(x.dtype), "training: x read twice")
        return Estimate("norm", d["flops"], d["bytes"], short(x.dtype))
    if name in (
        "native_batch_norm_backward",
        "cudnn_batch_norm_backward",
        "batch_norm_backward",
        "miopen_batch_norm_backward",
    ):
        go = t[0]
        x = t[1] if len(t) > 1 else go
        c = x.shape[1] if len(x.shape) > 1 else x.shape[0]
        d = norms.norm_backward(x.numel, c, c, e, flops_per=8)
        return Estimate("norm", d["flops"], d["bytes"], short(x.dtype))
    return None


def _softmax(name: str, ins: list[Operand]) -> Estimate | None:
    t = _tensors(ins)
    if not t:
        return None
    x = t[0]
    if name in ("softmax", "_softmax", "log_softmax", "_log_softmax", "_safe_softmax"):
        half_to_float = name.startswith("_") and len(ins) > 2 and _val(ins[2]) is True
        d = softmax.rowwise(x.numel, x.esize, 4 if half_to_float else None)
        return Estimate("softmax", d["flops"], d["bytes"], short(x.dtype))
    if name in ("_softmax_backward_data", "_log_softmax_backward_data"):
        d = softmax.rowwise_backward(x.numel, x.esize)
        return Estimate("softmax", d["flops"], d["bytes"], short(x.dtype))
    if name in ("cross_entropy_loss", "nll_loss", "nll_loss_forward", "nll_loss_nd", "nll_loss2d_forward"):
        rows = prod(x.shape[:-1]) if len(x.shape) > 1 else 1
        classes = x.shape[-1]
        if name == "cross_entropy_loss":
            d = softmax.cross_entropy(rows, classes, x.esize)
            return Estimate("softmax", d["flops"], d["bytes"], short(x.dtype))
        # nll_loss gathers one log-probability per row
        return Estimate("softmax", rows, rows * (8 + 2 * x.esize), short(x.dtype))
    if name in ("nll_loss_backward", "nll_loss2d_backward") and len(ins) > 3:
        # (grad_output, self, target, weight, reduction, ignore_index, total_weight)
        go, gi, target, weight = ins[0], ins[1], ins[2], ins[3]
        rows = gi.numel // gi.shape[1] if len(gi.shape) > 1 and gi.shape[1] else 1  # [N, C(, H, W)]: N(*H*W)
        d = softmax.nll_loss_backward(
            rows, gi.esize, go.nbytes, target.esize or 8, weight.tensor and bool(weight.shape)
        )
        return Estimate("softmax", d["flops"], d["bytes"], short(gi.dtype), "grad_input zeroed by a fill_ of its own")
    return None


def _embedding(name: str, ins: list[Operand]) -> Estimate | None:
    t = _tensors(ins)
    if len(t) < 2:
        return None
    if name in ("embedding", "embedding_bag", "_embedding_bag"):
        w, idx = t[0], t[1]
        d = embedding.forward(idx.numel, w.shape[-1], w.esize, idx.esize)
        return Estimate("embedding", d["flops"], d["bytes"], short(w.dtype))
    go, idx = t[0], t[1]
    vocab = next((v for v in (_val(o) for o in ins[2:]) if isinstance(v, int) and v > 0), None)
    if vocab is None:
        return None
    d = embedding.backward(idx.numel, go.shape[-1], vocab, go.esize, idx.esize)
    return Estimate("embedding", d["flops"], d["bytes"], short(go.dtype))


_MEMORY_COPY = {"copy_", "_to_copy", "clone", "contiguous", "_copy_from", "_copy_from_and_resize"}
_MEMORY_GATHER = {"index_select", "gather", "index", "take", "masked_select", "take_along_dim"}
_MEMORY_SCATTER = {
    "scatter",
    "scatter_",
    "scatter_add",
    "scatter_add_",
    "index_put_",
    "index_put",
    "_index_put_impl_",
    "index_add_",
    "index_add",
    "index_copy_",
    "masked_scatter_",
    "scatter_reduce",
}


def _memory(name: str, ins: list[Operand]) -> Estimate | None:
    t = _tensors(ins)
    if name in ("cat", "stack", "_cat", "concat"):
        lst = next((o for o in ins if o.items), None)
        if lst is None:
            return None
        e = next((o.esize for o in t), None) or size(lst.dtype)
        note = ""
        if e is None:  # a TensorList's dtype is not recorded
            e, note = 2, "list dtype not recorded: 2-byte elements assumed"
        nb = sum(prod(i.shape) for i in lst.items or ()) * e
        d = memory.cat(nb)
        return Estimate("memory", 0, d["bytes"], None, note)
    if not t:
        return None
    if name in _MEMORY_COPY:
        if name == "copy_" and len(t) >= 2:
            d = memory.copy(t[0].numel, t[1].esize, t[0].esize)
        elif name == "_to_copy":
            code: Any = _val(ins[1], None) if len(ins) > 1 else None
            d = memory.copy(t[0].numel, t[0].esize, _SCALAR_TYPES.get(code, t[0].esize))
        else:
            d = memory.copy(t[0].numel, t[0].esize, t[0].esize)
        return Estimate("memory", 0, d["bytes"], None)
    if name in _MEMORY_GATHER:
        src = t[0]
        idx = next((o for o in t[1:] if short(o.dtype) in ("int64", "int32", "bool")), None)
        if idx is None and ins[1:] and ins[1].items:
            idx = ins[1].items[0]
        if idx is None or idx.dims is None:
            return None
        out = idx.numel * (prod(src.shape[1:]) if name == "index_select" or name == "index" else 1)
        d = memory.gather(out, src.esize, idx.stored, idx.esize or 8)
        return Estimate("memory", 0, d["bytes"], None)
    if name in _MEMORY_SCATTER:
        src = t[-1]
        idx = next((o for o in t[1:] if short(o.dtype) in ("int64", "int32")), None)
        d = memory.scatter(src.numel, src.esize, idx.numel if idx else 0, 8, accumulate="add" in name or "put" in name)
        return Estimate("memory", d["flops"], d["bytes"], None)
    return None


_OPTIM_FUSED = {
    "_fused_adam_",
    "_fused_adamw_",
    "_fused_adam",
    "_fused_adamw",
    "_fused_sgd_",
    "_fused_sgd",
    "_fused_adagrad_",
}


def _optimizer(
    name: str, ins: list[Operand], kernels: list[tuple[str, int]] | None = None, grads: list[int] | None = None
) -> Estimate | None:
    lists = [o for o in ins if o.items]
    mt = optimizers.multi_tensor(kernels) if kernels else None
    fused = name in _OPTIM_FUSED
    # _fused_adam(w)_(self, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, lr, beta1,
    # beta2, weight_decay, eps, amsgrad, ...)
    amsgrad = fused and "adam" in name and len(ins) > 11 and bool(_val(ins[11], False))
    if not lists:
        if mt is None:
            return None  # torch.profiler writes [] for a list of more than 30 tensors
        # the sizes from the kernels: every list as long as the parameters, the lists that the
        # functor reads and writes
        e = mt["esize"]
        exact = optimizers.by_gradients(mt["blocks"], grads or [])
        if exact is not None:
            numel = exact
            note = (
                f"list sizes not recorded: the step's {len(grads or [])} gradients, whose chunks are the "
                f"{mt['blocks']:,} blocks of its {mt['launches']} multi_tensor_apply launches"
            )
        else:
            numel = mt["numel"]
            note = (
                f"list sizes not recorded: {numel / 1e6:,.1f} M elements from {mt['launches']} multi_tensor_apply "
                f"launches' grids ({optimizers.CHUNK:,}-element chunks: an upper bound)"
            )
        if fused and "sgd" in name:
            flops = optimizers.sgd(numel, e, momentum=mt["reads"] > 2)["flops"]
        elif fused:
            flops = optimizers.adam(numel, e, decoupled="adamw" in name)["flops"]
        else:
            flops = elementwise.FLOPS_PER_ELEMENT.get(name.removeprefix("_foreach_").rstrip("_"), 1) * numel
        return Estimate("optimizer", flops, numel * e * (mt["reads"] + mt["writes"]), short(mt["dtype"]), note)
    numel = sum(prod(i.shape) for i in lists[0].items or ())
    # a TensorList's type is "TensorList": the kernel's scalar type where known, else fp32
    e = size(lists[0].dtype) or (mt["esize"] if mt else None) or 4
    prec = short(lists[0].dtype) or (short(mt["dtype"]) if mt else None)
    if fused:
        if "sgd" in name:
            d = optimizers.sgd(numel, e, momentum=len(lists) > 2)
        else:
            d = optimizers.adam(numel, e, decoupled="adamw" in name, amsgrad=amsgrad)
        return Estimate("optimizer", d["flops"], d["bytes"], prec)
    base = name.removeprefix("_foreach_").rstrip("_")
    list_bytes = [sum(prod(i.shape) for i in lst.items or ()) * e for lst in lists]
    d = optimizers.foreach(list_bytes, numel * e, numel, elementwise.FLOPS_PER_ELEMENT.get(base, 1))
    return Estimate("optimizer", d["flops"], d["bytes"], prec)


def _reduction(name: str, ins: list[Operand]) -> Estimate | None:
    t = _tensors(ins)
    if not t:
        return None
    x = t[0]
    dims = _val(ins[1], None) if len(ins) > 1 else None
    if isinstance(dims, int):
        dims = [dims]
    if isinstance(dims, (list, tuple)) and dims and all(isinstance(d, int) for d in dims) and x.shape:
        nd = len(x.shape)
        red = {d % nd for d in dims}
        out = prod(s for i, s in enumerate(x.shape) if i not in red)
    else:
        out = 1
    d = reductions.reduce(x.numel, x.esize, out, x.esize, reductions.FLOPS_PER_ELEMENT.get(name, 1))
    return Estimate("reduction", d["flops"], d["bytes"], short(x.dtype))


# operators that write their output without reading it: the tensor they are given is a template
# (zeros_like) or the destination (fill_), not an operand of the arithmetic
_FILLS = {"fill_", "zero_", "zeros_like", "ones_like", "full_like", "normal_", "uniform_", "random_", "bernoulli_"}


def _category(o: Operand) -> int:
    s = short(o.dtype) or ""
    return 0 if s == "bool" else 1 if s.startswith(("int", "uint")) else 2


def _result(t: list[Operand]) -> Operand:
    """The dtype an elementwise operator computes in (torch's type promotion,
    c10/core/ScalarType.h promoteTypes and TensorIterator's compute_types): the tensors with
    dims decide; a 0-d tensor (a wrapped scalar: `x / 49` with an int64 49) only where it is of
    a higher category (bool < integer < floating), and then the default float."""
    dimmed = [o for o in t if o.shape] or t
    top = max(dimmed, key=lambda o: (_category(o), o.esize))
    if any(_category(o) > _category(top) for o in t if not o.shape):
        return Operand(top.shape, "float")
    return top


def _elementwise(name: str, ins: list[Operand]) -> Estimate | None:
    t = _tensors(ins)
    if not t:
        return None
    if name in _FILLS:  # written once, read not at all
        return Estimate("elementwise", 0, t[0].nbytes, short(t[0].dtype))
    out = _broadcast([o.shape for o in t])
    out_e = _result(t).esize
    base = name.rstrip("_") if name.endswith("_") and not name.endswith("__") else name
    fl = elementwise.FLOPS_PER_ELEMENT.get(name, elementwise.FLOPS_PER_ELEMENT.get(base, 1))
    d = elementwise.elementwise(sum(o.nbytes for o in t), prod(out), out_e, fl)
    return Estimate("elementwise", d["flops"], d["bytes"], short(t[0].dtype))


_MATMUL = {
    "mm",
    "addmm",
    "bmm",
    "baddbmm",
    "linear",
    "matmul",
    "_scaled_mm",
    "_scaled_mm_v2",
    "_grouped_mm",
    "_scaled_grouped_mm",
}
_CONV = {
    "convolution",
    "_convolution",
    "conv1d",
    "conv2d",
    "conv3d",
    "cudnn_convolution",
    "conv_transpose1d",
    "conv_transpose2d",
    "conv_transpose3d",
    "cudnn_convolution_transpose",
    "convolution_backward",
    "_convolution_double_backward",
    "mkldnn_convolution",
    "miopen_convolution",
}
_ATTN = (
    _ATTN_FWD
    | _ATTN_BWD
    | {
        "_flash_attention_forward",
        "_flash_attention_backward",
        "_efficient_attention_forward",
        "_efficient_attention_backward",
    }
)
_NORM = {
    "layer_norm",
    "native_layer_norm",
    "rms_norm",
    "_fused_rms_norm",
    "native_layer_norm_backward",
    "_fused_rms_norm_backward",
    "group_norm",
    "native_group_norm",
    "native_group_norm_backward",
    "batch_norm",
    "native_batch_norm",
    "cudnn_batch_norm",
    "_batch_norm_impl_index",
    "_native_batch_norm_legit",
    "_native_batch_norm_legit_no_training",
    "miopen_batch_norm",
    "native_batch_norm_backward",
    "cudnn_batch_norm_backward",
    "batch_norm_backward",
    "miopen_batch_norm_backward",
}
_SOFTMAX = {
    "softmax",
    "_softmax",
    "log_softmax",
    "_log_softmax",
    "_safe_softmax",
    "_softmax_backward_data",
    "_log_softmax_backward_data",
    "cross_entropy_loss",
    "nll_loss",
    "nll_loss_forward",
    "nll_loss_nd",
    "nll_loss2d_forward",
    "nll_loss_backward",
    "nll_loss2d_backward",
}
_EMBED = {
    "embedding",
    "embedding_bag",
    "_embedding_bag",
    "embedding_backward",
    "embedding_dense_backward",
    "_embedding_bag_backward",
    "_embedding_bag_dense_backward",
}

# metadata ops: views, allocation, host reads; they launch no kernel of their own
VIEWS = {
    "view",
    "reshape",
    "_unsafe_view",
    "t",
    "transpose",
    "permute",
    "as_strided",
    "expand",
    "select",
    "slice",
    "unbind",
    "split",
    "chunk",
    "squeeze",
    "unsqueeze",
    "flatten",
    "detach",
    "detach_",
    "alias",
    "narrow",
    "empty",
    "empty_like",
    "empty_strided",
    "resize_",
    "lift_fresh",
    "item",
    "_local_scalar_dense",
    "to",
    "unflatten",
    "view_as",
    "expand_as",
    "split_with_sizes",
    "numpy_T",
    "contiguous_",
}


_POOL = {
    "max_pool1d_with_indices",
    "max_pool2d_with_indices",
    "max_pool3d_with_indices",
    "max_pool2d",
    "max_pool1d",
    "max_pool3d",
    "avg_pool1d",
    "avg_pool2d",
    "avg_pool3d",
    "max_pool2d_with_indices_backward",
    "max_pool3d_with_indices_backward",
    "avg_pool2d_backward",
    "avg_pool3d_backward",
}


def _per_dim(v, dims: int, default: list[int]) -> list[int]:
    if v is None or v == [] or v == ():
        return default
    if isinstance(v, int):
        return [v] * dims
    return list(v) * dims if len(v) == 1 else list(v)


def _pool_forward(name: str, ins: list[Operand]) -> dict | None:
    """pooling.forward of a forward pooling op: (self, kernel_size, stride, padding[, dilation],
    ceil_mode, ...) as aten orders them."""
    x = _tensors(ins)[0]
    dims = int(name.split("pool")[1][0])  # max_pool2d_with_indices -> 2
    k = _per_dim(_val(ins[1], None) if len(ins) > 1 else None, dims, [])
    if not k:
        return None
    is_max = name.startswith("max")
    st = _per_dim(_val(ins[2], None) if len(ins) > 2 else None, dims, k)
    pad = _per_dim(_val(ins[3], 0) if len(ins) > 3 else 0, dims, [0] * dims)
    dil = _per_dim(_val(ins[4], 1) if is_max and len(ins) > 4 else 1, dims, [1] * dims)
    at = 5 if is_max else 4
    ceil = bool(_val(ins[at], False)) if len(ins) > at else False
    return pooling.forward(x.shape, k, st, pad, dil, x.esize, name.endswith("with_indices"), ceil)


def _pool(name: str, ins: list[Operand]) -> Estimate | None:
    t = _tensors(ins)
    if name.endswith("_backward"):
        # (grad_output, self, kernel_size, ...[, indices]): the input's gradient is self's size
        go, inp = t[0], t[1]
        k = _per_dim(_val(ins[2], None), len(inp.shape) - 2, [])
        if not k:
            return None
        d = pooling.backward(inp.numel, go.numel, prod(k), go.esize, name.startswith("max"))
        return Estimate("pooling", d["flops"], d["bytes"], short(go.dtype))
    f = _pool_forward(name, ins)
    return Estimate("pooling", f["flops"], f["bytes"], short(t[0].dtype)) if f else None


def family_of(op: str) -> str | None:
    """The family an operator's name belongs to (None: not one the model knows)."""
    name = op.removeprefix("aten::")
    for fam, names in (
        ("pooling", _POOL),
        ("matmul", _MATMUL),
        ("conv", _CONV),
        ("attention", _ATTN),
        ("norm", _NORM),
        ("softmax", _SOFTMAX),
        ("embedding", _EMBED),
    ):
        if name in names:
            return fam
    if name.startswith("_foreach_") or name in _OPTIM_FUSED:
        return "optimizer"
    if name in reductions.FLOPS_PER_ELEMENT:
        return "reduction"
    if name in _MEMORY_COPY or name in _MEMORY_GATHER or name in _MEMORY_SCATTER or name in ("cat", "stack"):
        return "memory"
    base = name.rstrip("_")
    if (
        name in elementwise.FLOPS_PER_ELEMENT
        or base in elementwise.FLOPS_PER_ELEMENT
        or name in _FILLS
        or name == "masked_fill_"
    ):
        return "elementwise"
    if op.startswith(("nccl:", "c10d::", "record_param_comms")):
        return "collective"
    return None


def estimate(
    op: str, ins: list[Operand], kernels: list[tuple[str, int]] | None = None, grads: list[int] | None = None
) -> tuple[Estimate | None, str]:
    """(the operator's work, "") or (None, why not). `kernels`, (name, grid blocks) of the launches
    the operator made, and `grads`, the element counts of the step's gradients, size an
    optimizer's tensor lists where the trace does not (profkit/model/ops/optimizers.py)."""
    name = op.removeprefix("aten::")
    fam = family_of(op)
    if fam is None:
        return None, f"{op}: not an operator the model knows"
    if not ins or not any(o.tensor or o.items for o in ins):
        if fam == "optimizer" and kernels and ins:
            est = _optimizer(name, ins, kernels, grads)
            if est is not None:
                return est, ""
        return None, f"{op}: no input shapes recorded"
    fn = {
        "matmul": _matmul,
        "conv": _conv,
        "attention": _attention,
        "norm": _norm,
        "softmax": _softmax,
        "embedding": _embedding,
        "optimizer": _optimizer,
        "reduction": _reduction,
        "pooling": _pool,
        "memory": _memory,
        "elementwise": _elementwise,
    }.get(fam)
    if fn is None:
        return None, f"{op}: {fam} needs its message size and rank count"
    try:
        est = _optimizer(name, ins, kernels, grads) if fam == "optimizer" else fn(name, ins)
    except (TypeError, ValueError, IndexError, ZeroDivisionError):
        est = None
    if est is None and fam == "elementwise" and name in _FILLS:
        return None, f"{op}: no tensor input"
    if est is None:
        return None, f"{op}: the recorded inputs do not give its {fam} shape"
    return est, ""


def collective(kind: str, nelems: int, dtype: str | None, ranks: int) -> Estimate | None:
    """A collective from record_param_comms' "In msg nelems", "dtype" and "Group size"."""
    e = size(dtype) or 4
    d = collectives.collective(kind.removeprefix("nccl:"), nelems * e, ranks, e)
    if d is None:
        return None
    return Estimate("collective", d["flops"], d["bytes"], short(dtype), f"bus bytes over {ranks} ranks", bus=True)


def written(op: str, ins: list[Operand]) -> float | None:
    """Bytes the operator's own kernels write at least: its output, or the part of it they write
    where aten zeroes the output in an operator of its own first (nll_loss_backward writes one
    element per row, embedding_dense_backward the rows its indices touch). None where unknown."""
    name = op.removeprefix("aten::")
    if name in ("nll_loss_backward", "nll_loss2d_backward"):
        e, _ = estimate(op, ins)
        gi = ins[1] if len(ins) > 1 else None
        if e is None or gi is None or not gi.tensor:
            return None
        return float(e.flops * gi.esize)  # one element per row (a FLOP each)
    if name == "embedding_dense_backward":
        t = _tensors(ins)
        vocab = next((v for v in (_val(o) for o in ins[2:]) if isinstance(v, int) and v > 0), None)
        if len(t) < 2 or vocab is None:
            return None
        return float(embedding.backward(t[1].numel, t[0].shape[-1], vocab, t[0].esize)["written"])
    out = output_of(op, ins)
    return float(out.nbytes) if out is not None and out.dims is not None else None


_SOFTMAX_FWD = ("softmax", "_softmax", "log_softmax", "_log_softmax", "_safe_softmax")


def kernel_traffic(op: str, ins: list[Operand]) -> tuple[float, float, str] | None:
    """(bytes read, bytes written, why) where PyTorch's stock CUDA kernels for the operator are
    known to move more than the minimum `estimate` gives; None where they move the minimum, as
    far as the model knows. The minimum stays the floor (fusion, advise); these are what the
    stock kernels' counters show and place their label."""
    name = op.removeprefix("aten::")
    t = _tensors(ins)
    if not t or not t[0].shape:
        return None
    x = t[0]
    if name in _SOFTMAX_FWD:
        e, _ = estimate(op, ins)
        reads = softmax.stock_cuda_reads(x.shape[-1] * x.esize)
        if e is None or reads == 1:
            return None
        why = f"rows of {x.shape[-1] * x.esize / 1024:,.0f} KB: the CUDA kernel reads each {reads} times"
        return reads * x.nbytes, e.bytes - x.nbytes, why
    if name in ("_softmax_backward_data", "_log_softmax_backward_data") and len(t) >= 2:
        go, y = t[0], t[1]  # (grad_output, output, dim, input_dtype)
        n = softmax.stock_cuda_backward_grad_reads(go.shape[-1] * go.esize)
        if n == 1:
            return None
        why = f"rows of {go.shape[-1] * go.esize / 1024:,.0f} KB: the CUDA kernel reads the gradient's {n} times"
        return n * go.nbytes + y.nbytes, float(go.numel * go.esize), why
    if name == "native_layer_norm_backward" and len(t) >= 2:
        # (grad_out, input, normalized_shape, mean, rstd, weight, bias, output_mask)
        go, xi = t[0], t[1]
        normalized = _val(ins[2], None) if len(ins) > 2 else None
        n = prod(normalized) if isinstance(normalized, (list, tuple)) and normalized else xi.shape[-1]
        mask = _val(ins[7], [True, True, True]) if len(ins) > 7 else [True, True, True]
        dw = len(mask) > 2 and bool(mask[1] or mask[2])
        if not (mask[0] and dw):
            return None  # one kernel: the minimum
        k = norms.layer_norm_backward_kernels(xi.numel, n, xi.numel // max(n, 1), xi.esize, True, True)
        return k["reads"], k["writes"], "two kernels (dx; dw and db), each reading dy and x"
    if name == "embedding_dense_backward" and len(t) >= 2:
        vocab = next((v for v in (_val(o) for o in ins[2:]) if isinstance(v, int) and v > 0), None)
        if vocab is None:
            return None
        k = embedding.backward_kernels(t[1].numel, x.shape[-1], vocab, x.esize, t[1].esize or 8)
        return k["reads"], k["writes"], k["path"]
    return None


def kernel_bytes(op: str, ins: list[Operand]) -> tuple[float, str] | None:
    """(bytes, why): `kernel_traffic`'s reads and writes together."""
    k = kernel_traffic(op, ins)
    return (k[0] + k[1], k[2]) if k else None


def describe(op: str, ins: list[Operand]) -> str:
    """aten::addmm [3072] x [4096, 1024] x [1024, 3072] bf16: the evidence text of an operator."""
    shapes = " x ".join(str(list(o.shape)) for o in ins if o.tensor)
    lists = [f"{len(o.items)} tensors" for o in ins if o.items]
    dts = sorted({s for o in ins if o.tensor and (s := short(o.dtype))})
    return " ".join(x for x in (op, shapes, ", ".join(lists), "/".join(dts)) if x)


_TYPE_OF_CODE = {5: "c10::Half", 6: "float", 7: "double", 15: "c10::BFloat16", 4: "long int", 3: "int", 11: "bool"}


def output_of(op: str, ins: list[Operand]) -> Operand | None:
    """The tensor an operator returns (its first output), from its inputs: what a fused kernel
    would keep on chip when the next operator reads it. None where the inputs do not say."""
    name = op.removeprefix("aten::")
    t = _tensors(ins)
    if not t:
        return None
    fam = family_of(op)
    if name.endswith("_") and not name.startswith("_foreach") and fam != "optimizer":
        return t[0]  # in place: the first input is the output
    x = t[0]
    try:
        if fam == "matmul":
            if name == "addmm":
                return Operand((t[1].shape[0], t[2].shape[-1]), t[1].dtype)
            if name == "linear":
                return Operand((*x.shape[:-1], t[1].shape[0]), x.dtype)
            if name == "baddbmm":
                return Operand((*t[1].shape[:-1], t[2].shape[-1]), t[1].dtype)
            if name in ("_scaled_mm", "_scaled_mm_v2"):
                return Operand((x.shape[0], t[1].shape[-1]), "c10::BFloat16")
            d = _matmul_dims(x.shape, t[1].shape)
            lead = _broadcast([x.shape[:-2], t[1].shape[:-2]]) if len(x.shape) > 2 or len(t[1].shape) > 2 else ()
            return Operand((*lead, d[1], d[2]), x.dtype) if d else None
        if fam == "conv":
            if name.endswith("backward"):  # (grad_out, input, weight, ...): grad_input first
                return Operand(t[1].shape, t[1].dtype)
            shaped = _conv_shapes(name, ins)
            return Operand(tuple(shaped[2]), x.dtype) if shaped else None
        if fam == "reduction":
            dims = _val(ins[1], None) if len(ins) > 1 else None
            keep = bool(_val(ins[2], False)) if len(ins) > 2 else False
            if isinstance(dims, int):
                dims = [dims]
            if not isinstance(dims, (list, tuple)) or not dims:
                return Operand((), x.dtype)
            red = {d % len(x.shape) for d in dims}
            return Operand(tuple(1 if i in red else s for i, s in enumerate(x.shape) if keep or i not in red), x.dtype)
        if name == "_to_copy":
            code: Any = _val(ins[1], None) if len(ins) > 1 else None
            return Operand(x.shape, _TYPE_OF_CODE.get(code, x.dtype))
        if name in ("nll_loss_backward", "nll_loss2d_backward"):  # (grad_output, self, ...): self's gradient
            return Operand(t[1].shape, t[1].dtype)
        if name == "embedding_dense_backward":  # (grad_output, indices, num_weights, ...): [V, D]
            vocab = _val(ins[2], None) if len(ins) > 2 else None
            return Operand((vocab, x.shape[-1]), x.dtype) if isinstance(vocab, int) else None
        if name in ("nll_loss", "nll_loss_forward", "nll_loss_nd", "nll_loss2d_forward", "cross_entropy_loss"):
            # reduction (after self, target, weight): 0 none -> a loss per row, else one scalar
            how = _val(ins[3], 1) if len(ins) > 3 else 1
            return Operand(tuple(x.shape[:-1]) if how == 0 else (), x.dtype)
        if name in ("gather", "take_along_dim"):  # (self, dim, index): the index's shape, self's dtype
            return Operand(t[1].shape, x.dtype)
        if name == "index_select":  # (self, dim, index): self with the indexed dim as long as the index
            d = _val(ins[1], 0) % len(x.shape)
            return Operand(tuple(t[1].numel if i == d else n for i, n in enumerate(x.shape)), x.dtype)
        if fam == "embedding" and name in ("embedding", "embedding_bag", "_embedding_bag"):
            return Operand((*t[1].shape, x.shape[-1]), x.dtype)
        if fam == "elementwise":
            return Operand(_broadcast([o.shape for o in t]), _result(t).dtype)
        if fam == "pooling":
            if name.endswith("_backward"):
                return Operand(t[1].shape, t[0].dtype)
            f = _pool_forward(name, ins)
            return Operand(f["out"], x.dtype) if f else None
    except (TypeError, IndexError, ValueError):
        return None
    return Operand(x.shape, x.dtype)
