import pytest
import torch

from _kernel_helpers import check, nan_like, randn
from profkit.kernels import softmax as K


@pytest.mark.parametrize("n", [100, 3000])
def test_single_tile(dtype, n):
    x = randn(5, n, dtype=dtype, scale=30.0)
    x[0, 3] = -float("inf")  # masked logit
    y = K.softmax(x, out=nan_like(x))
    check(y, K.softmax_reference(x), dtype, "triton")
    check(K.softmax_eager(x), K.softmax_reference(x), dtype, "eager", baseline=True)


@pytest.mark.parametrize("n", [1000, 5003])
def test_online_long_rows(dtype, n):
    # small thresholds push these rows down the online (vocabulary-size) path
    x = randn(3, n, dtype=dtype, scale=300.0 if dtype == "fp16" else 20.0)
    x[1, : n // 2] = -float("inf")  # lanes that only see -inf in the first chunks
    y = K.softmax(x, out=nan_like(x), max_single=256, chunk=256)
    check(y, K.softmax_reference(x), dtype, "online")


def test_vocab_row_default_path():
    x = randn(1, 20000, dtype="bf16", scale=5.0)  # > MAX_SINGLE: online path
    check(K.softmax(x), K.softmax_reference(x), "bf16")


def test_fp32_out_for_bf16_input():
    x = randn(4, 300, dtype="bf16", scale=10.0)
    out = torch.full((4, 300), float("nan"), dtype=torch.float32)
    K.softmax(x, out=out)
    check(out, K.softmax_reference(x), "fp32")


def test_liger_variant_refuses_rows_wider_than_liger_supports():
    import pytest
    import torch

    from profkit.kernels import softmax as sm

    with pytest.raises(ValueError, match="at most 65536"):
        sm._liger({"x": torch.zeros(1, sm.LIGER_MAX_N + 1)})
