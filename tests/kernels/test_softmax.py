import pytest
import torch

from _kernel_helpers import check, nan_like, randn
from profkit.kernels import softmax as K


@pytest.mark.parametrize("n", [100, 3000])
@pytest.mark.parametrize("block_m", [1, 4])
def test_single_tile(dtype, n, block_m):
    x = randn(5, n, dtype=dtype, scale=30.0)  # 5 rows: the last program of 4 is partial
    x[0, 3] = -float("inf")  # masked logit
    y = K.softmax(x, out=nan_like(x), config=(block_m, 4))
    check(y, K.softmax_reference(x), dtype, "triton")
    check(K.softmax_eager(x), K.softmax_reference(x), dtype, "eager", baseline=True)
    check(K.softmax_v1(x, out=nan_like(x)), K.softmax_reference(x), dtype, "v1")


@pytest.mark.parametrize("n", [1000, 5003])
@pytest.mark.parametrize("per_sm", [1, 2])
def test_online_long_rows(dtype, n, per_sm):
    # small thresholds push these rows down the online (vocabulary-size) path; 11 rows over
    # per_sm * 4 interpreter "SMs": programs walk several rows, some one fewer
    x = randn(11, n, dtype=dtype, scale=300.0 if dtype == "fp16" else 20.0)
    x[1, : n // 2] = -float("inf")  # a row whose first chunks are all -inf
    x[4, 700:] = 1e4 if dtype != "fp16" else 6e4  # the max arrives late: earlier sums rescaled
    y = K.softmax(x, out=nan_like(x), max_single=256, config=(per_sm, 256, 4))
    check(y, K.softmax_reference(x), dtype, "online")
    check(K.softmax_v1(x, out=nan_like(x), max_single=256, chunk=256), K.softmax_reference(x), dtype, "v1")


def test_online_without_rescale_is_caught():
    """A known-wrong online softmax (sums never rescaled when the max grows) fails the check."""
    x = randn(2, 1024, scale=5.0)
    x[:, 600:] += 20.0  # later chunks hold the max
    wrong = torch.cat([torch.exp(x[:, :512] - x[:, :512].max(1, keepdim=True).values),
                       torch.exp(x[:, 512:] - x.max(1, keepdim=True).values)], 1)
    wrong = wrong / wrong.sum(1, keepdim=True)
    with pytest.raises(AssertionError):
        check(wrong, K.softmax_reference(x), "fp32")
    check(K.softmax(x, max_single=256, config=(1, 512, 4)), K.softmax_reference(x), "fp32")


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
