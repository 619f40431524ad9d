"""The operator model against hand-derived numbers, and (matmul, convolution, attention) against
torch.utils.flop_counter.FlopCounterMode on CPU tensors: an independent count of the same ops."""

import pytest

from profkit.model.ops import aten
from profkit.model.ops.aten import Operand, estimate, operands

BF16, F32, I64 = "c10::BFloat16", "float", "long int"


def T(*dims, dtype=BF16):
    return Operand(tuple(dims), dtype)


def S(value):
    return Operand(None, "Scalar", str(value))


def est(op, *ins):
    e, why = estimate(op, list(ins))
    assert e is not None, why
    return e


# --- hand-derived ------------------------------------------------------------------------------


def test_addmm_as_a_trace_records_it():
    # aten::addmm [3072] x [4096, 1024] x [1024, 3072] bf16 (tf.kineto.json.gz)
    ins = operands([[3072], [4096, 1024], [1024, 3072], [], []], [BF16] * 3 + ["Scalar"] * 2, ["", "", "", "1", "1"])
    e = est("aten::addmm", *ins)
    assert e.family == "matmul" and e.dtype == "bf16"
    assert e.flops == 2 * 4096 * 3072 * 1024 + 4096 * 3072
    assert e.bytes == (4096 * 1024 + 1024 * 3072 + 4096 * 3072 + 3072) * 2
    assert aten.describe("aten::addmm", ins) == "aten::addmm [3072] x [4096, 1024] x [1024, 3072] bf16"


def test_linear_and_matmul_flatten_the_batch():
    assert est("aten::linear", T(8, 512, 1024), T(3072, 1024)).flops == 2 * 4096 * 3072 * 1024
    assert est("aten::matmul", T(8, 512, 1024), T(1024, 8192)).flops == 2 * 4096 * 8192 * 1024
    assert est("aten::bmm", T(4, 64, 32), T(4, 32, 16)).flops == 2 * 4 * 64 * 16 * 32


def test_scaled_mm_is_fp8_in_bf16_out():
    e = est(
        "aten::_scaled_mm",
        T(128, 256, dtype="c10::Float8_e4m3fn"),
        T(256, 512, dtype="c10::Float8_e4m3fn"),
        T(128, 1, dtype=F32),
        T(1, 512, dtype=F32),
    )
    assert e.dtype == "fp8" and e.flops == 2 * 128 * 256 * 512
    assert e.bytes == 128 * 256 + 256 * 512 + 128 * 512 * 2 + (128 + 512) * 4


def test_grouped_mm_splits_m_over_groups():
    e = est("aten::_grouped_mm", T(1000, 64), T(8, 64, 128), T(8, dtype="int"))
    assert e.flops == 2 * 1000 * 64 * 128


def test_attention_causal_computes_whole_tiles_and_backward_is_two_and_a_half():
    q = T(8, 16, 512, 64)
    f = est("aten::_scaled_dot_product_cudnn_attention", q, q, q, Operand(), S(True), S(0.0), S(True), S(False))
    full = 4 * 8 * 16 * 512 * 512 * 64
    # 4 query tiles of 128 rows run to 1, 2, 3, 4 key tiles of 128: 10 of 16 (H100 ncu: 4.09e9
    # counted vs 4.03e9 modelled on GPT-2's [8, 12, 512, 64], tests/test_opcheck.py)
    assert f.flops == full * 10 // 16 and "62.5 %" in f.note
    long = est(
        "aten::_scaled_dot_product_cudnn_attention",
        T(1, 1, 8192, 64),
        T(1, 1, 8192, 64),
        T(1, 1, 8192, 64),
        Operand(),
        S(True),
        S(0.0),
        S(True),
        S(False),
    )
    assert abs(long.flops / (4 * 8192 * 8192 * 64) - 0.5) < 0.01
    assert f.bytes == 4 * 8 * 16 * 512 * 64 * 2 + 4 * 8 * 16 * 512
    b = est(
        "aten::_scaled_dot_product_flash_attention_backward",
        q,
        q,
        q,
        q,
        q,
        T(8, 16, 512, dtype=F32),
        Operand(),
        Operand(),
        S(512),
        S(512),
        S(0.0),
        S(False),
    )
    assert b.flops == int(2.5 * full)


def test_varlen_flash_attention_is_an_upper_bound():
    q = T(3000, 16, 64)  # three sequences, 3000 tokens, the longest 1024
    e = est(
        "aten::_flash_attention_forward",
        q,
        q,
        q,
        T(4, dtype="int"),
        T(4, dtype="int"),
        S(1024),
        S(1024),
        S(0.0),
        S(True),
    )
    # causal: the share of the longest sequence's square, 9 of 16 tiles at 1024 tokens
    assert e.flops == round(4 * 16 * 3000 * 1024 * 64 * 9 / 16) and "upper bound" in e.note


def test_layer_norm_forward_and_backward():
    f = est(
        "aten::native_layer_norm",
        T(8, 512, 1024, dtype=F32),
        Operand(None, "ScalarList", "[1024]"),
        T(1024, dtype=F32),
        T(1024, dtype=F32),
        S(1e-5),
    )
    n = 8 * 512 * 1024
    assert f.flops == 5 * n + n and f.bytes == 2 * n * 4 + 2 * 1024 * 4 + 8 * 4096
    b = est(
        "aten::native_layer_norm_backward",
        T(8, 512, 1024, dtype=F32),
        T(8, 512, 1024, dtype=F32),
        Operand(None, "ScalarList", "[1024]"),
        T(8, 512, 1, dtype=F32),
        T(8, 512, 1, dtype=F32),
        T(1024, dtype=F32),
        T(1024, dtype=F32),
    )
    assert b.bytes == 3 * n * 4 + 8 * 4096 + 3 * 1024 * 4


def test_rms_group_and_batch_norm():
    assert est("aten::rms_norm", T(4096, 4096), Operand(None, "ScalarList", "[4096]"), T(4096)).flops == 4 * 4096 * 4096
    g = est(
        "aten::native_group_norm",
        T(2, 64, 8, 8, dtype=F32),
        T(64, dtype=F32),
        T(64, dtype=F32),
        S(2),
        S(64),
        S(64),
        S(32),
        S(1e-5),
    )
    assert g.family == "norm" and g.bytes >= 2 * 2 * 64 * 64 * 4
    assert est("aten::cudnn_batch_norm", T(32, 64, 56, 56, dtype=F32), T(64, dtype=F32)).family == "norm"


def test_softmax_and_cross_entropy():
    assert est("aten::_log_softmax", T(4096, 8192, dtype=F32), S(1), S(False)).bytes == 2 * 4096 * 8192 * 4
    ce = est("aten::cross_entropy_loss", T(4096, 8192, dtype=F32), T(4096, dtype=I64))
    assert ce.bytes == 4096 * 8192 * 4 + 8 * 4096 + 4


def test_embedding_forward_and_dense_backward():
    f = est("aten::embedding", T(8192, 1024, dtype=F32), T(8, 512, dtype=I64))
    assert f.flops == 0 and f.bytes == 4096 * 8 + 2 * 4096 * 1024 * 4
    b = est("aten::embedding_dense_backward", T(8, 512, 1024, dtype=F32), T(8, 512, dtype=I64), S(8192), S(-1))
    # the [8192, 1024] gradient is zeroed by a fill_ of its own: the kernels write the rows the
    # 4096 indices touch (at most 4096 of them)
    assert b.bytes == 4096 * 8 + 4096 * 1024 * 4 + 4096 * 1024 * 4


def test_embedding_backward_kernels_by_path():
    # GPT-2's position embedding (512 indices: the feature kernel adds into the zeroed rows, so
    # it reads them too; H100 ncu 3.15 MB read) and token embedding (4096 indices: sorted, fp32
    # partial sums written and read back; ncu 26.0 MB read)
    pos = [T(512, 768, dtype=F32), T(512, dtype=I64), S(512), S(-1), S(False)]
    assert aten.written("aten::embedding_dense_backward", pos) == 512 * 768 * 4
    assert aten.output_of("aten::embedding_dense_backward", pos).dims == (512, 768)
    rd, wr, _ = aten.kernel_traffic("aten::embedding_dense_backward", pos)
    assert rd == 512 * 8 + 2 * 512 * 768 * 4 and wr == 512 * 768 * 4
    tok = [T(8, 512, 768, dtype=F32), T(8, 512, dtype=I64), S(50257), S(-1), S(False)]
    rd, wr, why = aten.kernel_traffic("aten::embedding_dense_backward", tok)
    assert rd == 4096 * 8 + 4096 * 768 * 4 + 4096 * 768 * 4 and "sorted" in why
    assert aten.output_of("aten::embedding_dense_backward", tok).dims == (50257, 768)


def test_fill_writes_and_reads_nothing():
    # GPT-2's loss gradient zeroed: [4096, 50257] fp32 written once (H100 ncu: 10 KB read)
    for op in ("aten::fill_", "aten::zero_"):
        e = est(op, T(4096, 50257, dtype=F32), S(0))
        assert e.bytes == 4096 * 50257 * 4 and e.flops == 0
        assert aten.written(op, [T(4096, 50257, dtype=F32), S(0)]) == e.bytes
    assert est("aten::zeros_like", T(64, 64, dtype=F32)).bytes == 64 * 64 * 4


def test_nll_loss_backward_writes_one_element_per_row():
    # (grad_output, self, target, weight, reduction, ignore_index, total_weight) as GPT-2's trace
    # records it; grad_input is zeroed by a fill_ of its own (H100 ncu: 39 KB read, the 32 KB
    # targets and a kernel's own few KB)
    ins = operands(
        [[], [4096, 50257], [4096], [], [], [], []],
        [F32, F32, I64, "", "Scalar", "Scalar", F32],
        ["", "", "", "", "1", "-100", ""],
    )
    e = est("aten::nll_loss_backward", *ins)
    assert e.bytes == 4096 * 8 + 4 + 4 + 4096 * 4 and e.flops == 4096
    assert aten.written("aten::nll_loss_backward", ins) == 4096 * 4
    assert aten.output_of("aten::nll_loss_backward", ins).dims == (4096, 50257)


def test_layer_norm_backward_runs_two_kernels_each_reading_dy_and_x():
    n, g = 8 * 512 * 768, 8 * 512
    ins = operands(
        [[8, 512, 768], [8, 512, 768], [], [8, 512, 1], [8, 512, 1], [768], [768], []],
        [F32, F32, "ScalarList", F32, F32, F32, F32, "ScalarList"],
        ["", "", "[768]", "", "", "", "", "[True, True, True]"],
    )
    minimum = est("aten::native_layer_norm_backward", *ins)
    assert minimum.bytes == 3 * n * 4 + 8 * g + 3 * 768 * 4
    rd, wr, why = aten.kernel_traffic("aten::native_layer_norm_backward", ins)
    # dx: dy, x, stats, w read; dw and db: dy, x, stats read (H100 ncu: 50.43 MB, 2 x 25.2)
    assert rd == 2 * (2 * n * 4 + 8 * g) + 768 * 4 and wr == n * 4 + 2 * 768 * 4 and "two kernels" in why
    assert aten.kernel_bytes("aten::native_layer_norm_backward", ins)[0] == rd + wr
    only_dx = operands(
        [[8, 512, 768], [8, 512, 768], [], [8, 512, 1], [8, 512, 1], [768], [768], []],
        [F32, F32, "ScalarList", F32, F32, F32, F32, "ScalarList"],
        ["", "", "[768]", "", "", "", "", "[True, False, False]"],
    )
    assert aten.kernel_traffic("aten::native_layer_norm_backward", only_dx) is None


def test_log_softmax_backward_over_long_rows_reads_the_gradient_twice():
    go, y = T(4096, 50257, dtype=F32), T(4096, 50257, dtype=F32)
    rd, wr, _ = aten.kernel_traffic("aten::_log_softmax_backward_data", [go, y, S(1), S(6)])
    assert rd == 3 * go.nbytes and wr == go.nbytes  # H100 ncu: 2.403 GB read (1.03)
    assert aten.kernel_traffic("aten::_log_softmax_backward_data", [T(64, 1000), T(64, 1000), S(1), S(15)]) is None


def test_a_zero_dim_operand_does_not_widen_the_result():
    # ResNet-18's avg-pool backward: bf16 [64, 512, 7, 7] (expanded from [64, 512, 1, 1]) / an
    # int64 0-d 49: the kernel (BUnaryFunctor<BFloat16, ...>) writes bf16
    ins = operands([[64, 512, 7, 7], []], [BF16, I64], None, [[512, 1, 0, 0], []])
    assert aten.output_of("aten::div", ins).dtype == BF16
    assert est("aten::div", *ins).bytes == 64 * 512 * 2 + 8 + 64 * 512 * 49 * 2
    # a 0-d float over an integer tensor: the default float
    assert aten.output_of("aten::mul", [T(1024, dtype=I64), T(dtype=F32)]).dtype == F32
    assert aten.output_of("aten::add", [T(1024, dtype=F32), T(1024)]).dtype == F32


def test_elementwise_broadcast_and_mixed_dtypes():
    e = est("aten::add", T(8, 512, 1024, dtype=F32), T(8, 512, 1024), S(1))
    n = 8 * 512 * 1024
    assert e.bytes == n * 4 + n * 2 + n * 4 and e.flops == n
    assert est("aten::gelu", T(8, 512, 4096), Operand()).flops == 8 * 8 * 512 * 4096
    assert est("aten::mul", T(64, 1), T(1, 128)).bytes == (64 + 128 + 64 * 128) * 2


def test_reductions_copies_and_gathers():
    r = est("aten::sum", T(4096, 1024), Operand(None, "ScalarList", "[0]"), S(True))
    assert r.bytes == 4096 * 1024 * 2 + 1024 * 2
    c = est("aten::copy_", T(8, 512, 8192), T(8, 512, 8192, dtype=F32), S(False))
    assert c.bytes == 8 * 512 * 8192 * 6
    to = est("aten::_to_copy", T(8, 512, 8192, dtype=F32), S(15), S(0))  # 15: BFloat16
    assert to.bytes == 8 * 512 * 8192 * 6
    g = est("aten::index_select", T(8192, 1024, dtype=F32), S(0), T(4096, dtype=I64))
    assert g.bytes == 4096 * 8 + 2 * 4096 * 1024 * 4
    cat = est("aten::cat", Operand(None, "TensorList", None, (T(2, 3), T(2, 3))), S(0))
    assert cat.bytes == 2 * 12 * 2 and "assumed" in cat.note


def test_optimizers_fused_and_foreach():
    params = Operand(None, "TensorList", None, (T(1000, dtype=F32), T(24, dtype=F32)))
    a = est("aten::_fused_adamw_", params, params, params, params)
    assert a.bytes == 1024 * 4 * 7 and a.flops == 14 * 1024
    s = est("aten::_fused_sgd_", params, params)
    assert s.bytes == 1024 * 4 * 3
    f = est("aten::_foreach_mul_", params, S(0.9))
    assert f.bytes == 1024 * 4 * 2
    # torch.profiler writes [] for a list of more than 30 tensors: without its kernels, nothing to
    # say, and why
    e, why = estimate("aten::_foreach_mul_", operands([[], []], ["TensorList", "Scalar"], ["", "0.9"]))
    assert e is None and "no input shapes" in why
    # amsgrad keeps a fifth list, max_exp_avg_sq: read and written
    flags = [S(x) for x in (3e-4, 0.9, 0.999, 0.01, 1e-8, True, False)]
    am = est("aten::_fused_adamw_", params, params, params, params, params, params, *flags)
    assert am.bytes == 1024 * 4 * 9


# the kernels of GPT-2's fused AdamW and ResNet's foreach SGD (tests/data/opmodel-h100 traces)
NS = "at::native::(anonymous namespace)::"
ADAMW_KERNEL = (
    f"void {NS}multi_tensor_apply_kernel<{NS}FusedOptimizerTensorListMetadata<4>, {NS}FusedAdamMathFunctor<float, 4,"
    f" (at::native::ADAM_MODE)1, false>, float const*, double, double, double, double, double, bool, float const*,"
    f" float const*>({NS}FusedOptimizerTensorListMetadata<4>, {NS}FusedAdamMathFunctor<float, 4,"
    " (at::native::ADAM_MODE)1, false>, float const*, double, double, double, double, double, bool, float const*,"
    " float const*)"
)
ADD_LISTS_KERNEL = (
    f"void {NS}multi_tensor_apply_kernel<{NS}TensorListMetadata<2>, {NS}BinaryOpListAlphaFunctor<float, 2, 2, 0>,"
    f" std::plus<float>, float>({NS}TensorListMetadata<2>, {NS}BinaryOpListAlphaFunctor<float, 2, 2, 0>,"
    " std::plus<float>, float)"
)


def test_optimizer_lists_sized_from_their_kernels():
    # GPT-2's 76 parameters (81.5 M fp32 elements) in 1,293 chunks over five launches
    ins = operands(
        [[]] * 6 + [[]] * 7 + [[], []],
        ["TensorList"] * 6 + ["Scalar"] * 7 + ["", ""],
        [""] * 6 + ["0.0003", "0.9", "0.999", "0.01", "1e-08", "False", "False", "", ""],
    )
    e, why = estimate("aten::_fused_adamw_", ins, [(ADAMW_KERNEL, 320)] * 4 + [(ADAMW_KERNEL, 13)])
    assert e is not None, why
    n = 1293 * 65536
    assert e.family == "optimizer" and e.dtype == "fp32"
    assert e.bytes == n * 4 * (4 + 3) and e.flops == 14 * n and "upper bound" in e.note
    # _foreach_add_(bufs, grads, alpha): two lists read, the first written
    ins = operands([[], [], []], ["TensorList", "TensorList", "Scalar"], ["", "", "1"])
    f, _ = estimate("aten::_foreach_add_", ins, [(ADD_LISTS_KERNEL, 200)])
    assert f is not None and f.bytes == 200 * 65536 * 4 * 3
    # a kernel that is not multi_tensor_apply says nothing
    assert estimate("aten::_foreach_add_", ins, [("void foo<float>(float)", 10)])[0] is None


def test_collectives_bus_bytes():
    ar = aten.collective("all_reduce", 1 << 20, "bfloat16", 8)
    assert ar.bytes == (1 << 21) * 2 * 7 / 8 and ar.bus
    ag = aten.collective("all_gather", 1 << 20, "float32", 4)
    assert ag.bytes == (1 << 22) * 3 / 4 and ag.flops == 0
    assert aten.collective("nccl:broadcast", 100, "float32", 2).bytes == 400


def test_unknown_ops_say_why():
    e, why = estimate("aten::my_custom", [T(4)])
    assert e is None and "not an operator the model knows" in why
    e, why = estimate("aten::mm", [Operand(None, BF16)])
    assert e is None and "no input shapes" in why


# --- against FlopCounterMode ---------------------------------------------------------------------

torch = pytest.importorskip("torch")


def _counted(fn) -> int:
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as m:
        fn()
    return m.get_total_flops()


def _ops(*ts):
    names = {torch.bfloat16: BF16, torch.float32: F32, torch.int64: I64}
    return [
        Operand(tuple(t.shape), names[t.dtype]) if isinstance(t, torch.Tensor) else Operand(None, "Scalar", str(t))
        for t in ts
    ]


@pytest.mark.parametrize(
    "op,shapes",
    [
        ("mm", [(64, 32), (32, 48)]),
        ("bmm", [(3, 64, 32), (3, 32, 48)]),
        ("matmul", [(2, 5, 64, 32), (32, 48)]),
    ],
)
def test_matmul_family_matches_flop_counter(op, shapes):
    ts = [torch.randn(*s) for s in shapes]
    fn = getattr(torch, op)
    assert est(f"aten::{op}", *_ops(*ts)).flops == _counted(lambda: fn(*ts))


def test_addmm_and_linear_match_flop_counter_products():
    b, a, w = torch.randn(48), torch.randn(64, 32), torch.randn(32, 48)
    # the counter counts the product only; the model adds the bias epilogue (M*N)
    assert est("aten::addmm", *_ops(b, a, w)).flops == _counted(lambda: torch.addmm(b, a, w)) + 64 * 48
    x, wl = torch.randn(4, 16, 32), torch.randn(48, 32)
    assert est("aten::linear", *_ops(x, wl)).flops == _counted(lambda: torch.nn.functional.linear(x, wl))


@pytest.mark.parametrize("stride,padding,dilation,groups", [(1, 1, 1, 1), (2, 0, 1, 1), (1, 2, 2, 4)])
def test_convolution_forward_and_backward_match_flop_counter(stride, padding, dilation, groups):
    x = torch.randn(2, 8, 17, 15, requires_grad=True)
    w = torch.randn(16, 8 // groups, 3, 3, requires_grad=True)
    y = torch.nn.functional.conv2d(x, w, None, stride, padding, dilation, groups)
    conv_args = [
        Operand(None, "ScalarList", str([stride] * 2)),
        Operand(None, "ScalarList", str([padding] * 2)),
        Operand(None, "ScalarList", str([dilation] * 2)),
        S(False),
        Operand(None, "ScalarList", "[0, 0]"),
        S(groups),
    ]
    f = est("aten::convolution", *_ops(x, w), Operand(), *conv_args)
    assert f.flops == _counted(lambda: torch.nn.functional.conv2d(x, w, None, stride, padding, dilation, groups))
    go = torch.randn_like(y)
    counted = _counted(
        lambda: torch.ops.aten.convolution_backward(
            go, x, w, None, [stride] * 2, [padding] * 2, [dilation] * 2, False, [0, 0], groups, [True, True, False]
        )
    )
    b = est(
        "aten::convolution_backward",
        *_ops(go, x, w),
        Operand(None, "ScalarList", "[16]"),
        *conv_args,
        Operand(None, "ScalarList", "[True, True, False]"),
    )
    # grad_input and grad_weight each cost the forward's products; the counter counts a grouped
    # convolution's grad_weight over every input channel (groups x the products done)
    assert counted == b.flops // 2 * (1 + groups)


@pytest.mark.parametrize("lq,lk,e,ev", [(64, 64, 32, 32), (17, 40, 64, 16)])
def test_attention_matches_flop_counter(lq, lk, e, ev):
    # the counter registers no formula for the CPU's own SDPA kernel: its formulas for the
    # CUDA kernels (the ones a GPU trace names) are called on the same shapes
    from torch.utils.flop_counter import sdpa_backward_flop_count, sdpa_flop_count

    q, k, v = torch.randn(2, 4, lq, e), torch.randn(2, 4, lk, e), torch.randn(2, 4, lk, ev)
    f = est("aten::_scaled_dot_product_efficient_attention", *_ops(q, k, v), Operand(), S(False), S(0.0), S(False))
    assert f.flops == sdpa_flop_count(q.shape, k.shape, v.shape)

    go = torch.randn(2, 4, lq, ev)
    b = est(
        "aten::_scaled_dot_product_efficient_attention_backward",
        *_ops(go, q, k, v, go),
        T(2, 4, lq, dtype=F32),
        S(0.0),
        S(False),
    )
    assert b.flops == sdpa_backward_flop_count(go.shape, q.shape, k.shape, v.shape)


def test_training_batch_norm_reads_its_input_twice():
    x = T(64, 64, 112, 112, dtype="c10::Half")
    args = [x, T(64, dtype=F32), T(64, dtype=F32), T(64, dtype=F32), T(64, dtype=F32)]
    train = est("aten::native_batch_norm", *args, S(True), S(0.1), S(1e-5))
    infer = est("aten::native_batch_norm", *args, S(False), S(0.1), S(1e-5))
    assert train.bytes == infer.bytes + x.nbytes and "twice" in train.note


def test_max_pool_with_indices_forward_and_backward():
    # ResNet's stem pool: 3x3, stride 2, padding 1 over [64, 64, 112, 112] -> 56 x 56
    x = T(64, 64, 112, 112)
    k, s, p, d = (Operand(None, "ScalarList", v) for v in ("[3, 3]", "[2, 2]", "[1, 1]", "[1, 1]"))
    f = est("aten::max_pool2d_with_indices", x, k, s, p, d, S(False))
    n_in, n_out = 64 * 64 * 112 * 112, 64 * 64 * 56 * 56
    assert f.family == "pooling" and f.bytes == n_in * 2 + n_out * 2 + n_out * 8 and f.flops == 9 * n_out
    assert aten.output_of("aten::max_pool2d_with_indices", [x, k, s, p, d, S(False)]).dims == (64, 64, 56, 56)
    g = T(64, 64, 56, 56)
    b = est("aten::max_pool2d_with_indices_backward", g, x, k, s, p, d, S(False), T(64, 64, 56, 56, dtype="long int"))
    assert b.bytes == n_out * 2 + n_out * 8 + n_in * 2
    assert est("aten::avg_pool2d", T(8, 3, 32, 32), Operand(None, "ScalarList", "[2, 2]")).bytes == (
        8 * 3 * 32 * 32 * 2 + 8 * 3 * 16 * 16 * 2
    )


def test_an_expanded_index_is_read_as_its_storage():
    # GPT-2's position gather: an int64 index [4096, 768] expanded from [4096] (strides [1, 0])
    ins = operands(
        [[50257, 768], [], [4096, 768], [], [4096, 768]],
        ["float", "Scalar", "long int", "Scalar", "float"],
        ["", "0", "", "False", ""],
        [[768, 1], [], [1, 0], [], [768, 1]],
    )
    e, _ = estimate("aten::gather", ins)
    assert e.bytes == 4096 * 8 + 2 * 4096 * 768 * 4
    plain, _ = estimate("aten::gather", operands([[50257, 768], [], [4096, 768]], ["float", "Scalar", "long int"]))
    assert plain.bytes == 4096 * 768 * 8 + 2 * 4096 * 768 * 4


def test_softmax_over_long_rows_reads_them_three_times_in_the_stock_kernel():
    x = T(4096, 50257, dtype=F32)
    e = est("aten::_log_softmax", x, S(1), S(False))
    moved, why = aten.kernel_bytes("aten::_log_softmax", [x, S(1), S(False)])
    assert moved == e.bytes + 2 * x.nbytes and "3 times" in why
    assert aten.kernel_bytes("aten::_softmax", [T(4096, 4096), S(1), S(False)]) is None  # 8 KB rows fit


def test_cudnn_convolution_reads_padding_before_stride():
    # ResNet-18's 1x1 stride-2 downsample as the trace records it: (self, weight, padding [0, 0],
    # stride [2, 2], dilation, groups, ...): 28x28 -> 14x14 (read as stride/padding/dilation of
    # aten::convolution it came out 15x15: 1.10-1.22x ncu's FLOPs on H100)
    ins = operands(
        [[64, 128, 28, 28], [256, 128, 1, 1], [], [], [], [], [], [], []],
        [BF16, BF16] + ["ScalarList"] * 3 + ["Scalar"] * 4,
        ["", "", "[0, 0]", "[2, 2]", "[1, 1]", "1", "False", "False", "True"],
    )
    e, _ = estimate("aten::cudnn_convolution", ins)
    assert e.flops == 2 * 64 * 256 * 14 * 14 * 128
    stem = operands(
        [[64, 3, 224, 224], [64, 3, 7, 7]] + [[]] * 7,
        [BF16, BF16] + ["ScalarList"] * 3 + ["Scalar"] * 4,
        ["", "", "[3, 3]", "[2, 2]", "[1, 1]", "1", "False", "False", "True"],
    )
    assert estimate("aten::cudnn_convolution", stem)[0].flops == 2 * 64 * 64 * 112 * 112 * 3 * 49


def test_gradients_size_the_lists_where_their_chunks_are_the_blocks():
    ins = operands([[]] * 6, ["TensorList"] * 6, [""] * 6)
    grads = [50257 * 768, 768, 768]  # 589 + 1 + 1 chunks
    e, _ = estimate("aten::_fused_adamw_", ins, [(ADAMW_KERNEL, 320), (ADAMW_KERNEL, 271)], grads)
    assert e is not None and e.bytes == sum(grads) * 4 * 7 and "3 gradients" in e.note
    # other tensors than these gradients (a parameter group, a step counter list): the bound
    e, _ = estimate("aten::_fused_adamw_", ins, [(ADAMW_KERNEL, 590)], grads)
    assert e is not None and e.bytes == 590 * 65536 * 4 * 7 and "upper bound" in e.note


def test_a_convolution_returns_its_output_shape():
    # ResNet-18's stem as aten::cudnn_convolution records it: (self, weight, padding, stride, ...)
    ins = operands(
        [[64, 3, 224, 224], [64, 3, 7, 7], [], [], [], [], [], [], []],
        [BF16, BF16] + ["ScalarList"] * 3 + ["Scalar"] * 4,
        ["", "", "[3, 3]", "[2, 2]", "[1, 1]", "1", "False", "False", "True"],
    )
    assert aten.output_of("aten::cudnn_convolution", ins).dims == (64, 64, 112, 112)
    go, x, w = T(64, 64, 112, 112), T(64, 3, 224, 224), T(64, 3, 7, 7)
    assert aten.output_of("aten::convolution_backward", [go, x, w]).dims == (64, 3, 224, 224)


def test_multi_tensor_functors_name_their_lists():
    from profkit.model.ops.optimizers import multi_tensor

    def k(functor):
        return (f"void {NS}multi_tensor_apply_kernel<{NS}TensorListMetadata<3>, {NS}{functor}, float>(...)", 2)

    # out of place (_foreach_add(a, b)): lists 0 and 1 read, list 2 written
    m = multi_tensor([k("BinaryOpListAlphaFunctor<c10::BFloat16, 3, 2, 2>")])
    assert (m["reads"], m["writes"], m["esize"], m["numel"]) == (2, 1, 2, 2 * 65536)
    # _foreach_zero_: nothing read
    assert multi_tensor([k("ZeroFunctor<float, 1, 0, 0>")])["reads"] == 0
    # fused SGD with momentum: param, grad, momentum buffer read; param and buffer written
    m = multi_tensor([k("FusedSgdMathFunctor<float, 3>")])
    assert (m["reads"], m["writes"]) == (3, 2)
    # a functor over a type with template arguments of its own is not read
    assert multi_tensor([k("UnaryOpFunctor<c10::complex<float>, 2, 1, 1>")]) is None
