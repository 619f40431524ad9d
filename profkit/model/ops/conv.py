"""Convolution: forward, and the two backward products (grad of the input: a transposed
convolution of grad_out by the weight; grad of the weight: a correlation of the input with
grad_out). Each is 2 FLOPs per multiply-add of the forward: 2 * N * C_out * prod(out spatial) *
(C_in / groups) * prod(kernel) (the count torch.utils.flop_counter uses too). Bytes: every
operand read once and the result written once.
"""

from __future__ import annotations

from math import prod


def out_spatial(in_sp, kernel, stride, padding, dilation, transposed=False, output_padding=None) -> list[int]:
    out = []
    for i, (x, k) in enumerate(zip(in_sp, kernel)):
        s, p, d = stride[i], padding[i], dilation[i]
        if transposed:
            op = output_padding[i] if output_padding else 0
            out.append((x - 1) * s - 2 * p + d * (k - 1) + op + 1)
        else:
            out.append((x + 2 * p - d * (k - 1) - 1) // s + 1)
    return out


def conv_flops(x_shape, w_shape, out_shape, transposed: bool = False) -> int:
    """2 * (multiply-adds): every output element of a non-transposed convolution sums
    C_in/groups * prod(kernel) products (w_shape[1:]); a transposed one spreads every input
    element over w_shape[1:] outputs."""
    if transposed:
        return 2 * prod(x_shape) * prod(w_shape[1:])
    return 2 * prod(out_shape) * prod(w_shape[1:])


def conv_forward(x_shape, w_shape, out_shape, e: int, bias: bool, transposed: bool = False) -> dict:
    return {
        "flops": conv_flops(x_shape, w_shape, out_shape, transposed) + (prod(out_shape) if bias else 0),
        "bytes": (prod(x_shape) + prod(w_shape) + prod(out_shape) + (out_shape[1] if bias else 0)) * e,
    }


def conv_backward(go_shape, x_shape, w_shape, e: int, mask=(True, True, True), transposed: bool = False) -> dict:
    """grad_input (mask[0]) and grad_weight (mask[1]) each cost the forward's products; grad_bias
    (mask[2]) sums grad_out. Each product reads its two operands and writes its result."""
    fwd = conv_flops(x_shape, w_shape, go_shape, transposed)
    flops, b = 0, 0
    if mask[0]:
        flops += fwd
        b += prod(go_shape) + prod(w_shape) + prod(x_shape)
    if mask[1]:
        flops += fwd
        b += prod(go_shape) + prod(x_shape) + prod(w_shape)
    if len(mask) > 2 and mask[2]:
        flops += prod(go_shape)
        b += prod(go_shape) + go_shape[1]
    return {"flops": flops, "bytes": b * e}
