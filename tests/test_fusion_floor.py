"""The fusion floor (profkit/analyses/fusion.py): what one kernel doing a range's operators must
move, from the operators' shapes; and advise using it for a timeline-only run."""
import json

from profkit.analyses import fusion
from profkit.model.ops.aten import Operand

BF16, F32 = "c10::BFloat16", "float"
T, H = 4096, 4096


def t(*dims, dtype=BF16):
    return Operand(tuple(dims), dtype)


def s(v):
    return Operand(None, "Scalar", str(v))


def test_eager_rmsnorm_fused_reads_x_and_w_and_writes_y():
    # x.float(); pow(2); mean(-1, keepdim); + eps; rsqrt; x * r; .to(bf16); w * y: as aten records it
    ops = [("aten::_to_copy", [t(T, H), s(6)]),
           ("aten::pow", [t(T, H, dtype=F32), s(2)]),
           ("aten::mean", [t(T, H, dtype=F32), Operand(None, "ScalarList", "[-1]"), s(True)]),
           ("aten::add", [t(T, 1, dtype=F32), s(1e-6), s(1)]),
           ("aten::rsqrt", [t(T, 1, dtype=F32)]),
           ("aten::mul", [t(T, H, dtype=F32), t(T, 1, dtype=F32)]),
           ("aten::_to_copy", [t(T, H, dtype=F32), s(15)]),
           ("aten::mul", [t(H), t(T, H)])]
    b_in, b_out, _ = fusion.external_bytes(ops)
    assert b_in == T * H * 2 + H * 2 and b_out == T * H * 2


def test_residual_add_then_layer_norm_reads_both_inputs():
    ops = [("aten::add", [t(T, H), t(T, H), s(1)]),
           ("aten::native_layer_norm", [t(T, H), Operand(None, "ScalarList", f"[{H}]"), t(H), t(H), s(1e-5)])]
    b_in, b_out, _ = fusion.external_bytes(ops)
    # x and the residual are distinct tensors of one shape, read by one op: both counted
    assert b_in == 2 * T * H * 2 + 2 * H * 2 and b_out == T * H * 2


def _ln_call(read_after: bool):
    """add (op 10) -> layer_norm (11, a wrapper) -> native_layer_norm (12); x, r, w, b made by
    ops 1-4; an op after the call (20) reads the norm (through its wrapper's id) and maybe the sum."""
    ops = [("aten::add", [t(T, H), t(T, H), s(1)]),
           ("aten::native_layer_norm", [t(T, H), Operand(None, "ScalarList", f"[{H}]"), t(H), t(H), s(1e-5)])]
    rows = [{"torch_op_id": 10, "input_op_ids": "[[1,0],[2,0],[0,-1]]"},
            {"torch_op_id": 12, "input_op_ids": "[[10,0],[0,-1],[3,0],[4,0],[0,-1]]"}]
    run = fusion.Ops()
    run.ids = [1, 2, 3, 4, 10, 12, 20]
    run.last_reader = {1: 10, 2: 10, 3: 12, 4: 12, 10: 20 if read_after else 12, 11: 20}
    return ops, rows, run


def test_tensor_identity_sees_the_sum_that_leaves_the_call():
    ops, rows, run = _ln_call(read_after=True)
    assert fusion.identity_bytes(ops, rows, run) == (2 * T * H * 2 + 2 * H * 2, 2 * T * H * 2)
    ops, rows, run = _ln_call(read_after=False)
    assert fusion.identity_bytes(ops, rows, run) == (2 * T * H * 2 + 2 * H * 2, T * H * 2)


def test_tensor_identity_reads_one_tensor_once_and_needs_every_producer():
    ops, rows, run = _ln_call(read_after=False)
    rows[1]["input_op_ids"] = "[[10,0],[0,-1],[1,0],[4,0],[0,-1]]"  # the weight is x itself
    assert fusion.identity_bytes(ops, rows, run)[0] == 2 * T * H * 2 + H * 2
    rows[1]["input_op_ids"] = None
    assert fusion.identity_bytes(ops, rows, run) is None


def test_emit_nvtx_text_gives_the_op_id_and_its_inputs_producers():
    from profkit.parsers._ops import _nvtx_op, nvtx_op

    text = ("aten::native_layer_norm, op_id = 763, sizes = [[16384, 1024], [], [1024], [1024], []], "
            "input_op_ids = [(761,0), (0,-1), (715,0), (718,0), (0,-1)]")
    assert nvtx_op(text) == ("aten::native_layer_norm", [[16384, 1024], [], [1024], [1024], []])
    assert _nvtx_op(text)[2:] == (763, "[[761,0],[0,-1],[715,0],[718,0],[0,-1]]")
    # producers that do not pair with the inputs one to one are not kept
    assert _nvtx_op(text.replace("(718,0), ", ""))[3] is None


def test_gelu_mlp_epilogue_keeps_the_product_on_chip():
    ops = [("aten::addmm", [t(3072), t(T, 768), t(768, 3072), s(1), s(1)]),
           ("aten::gelu", [t(T, 3072), Operand(None, "", "none")])]
    b_in, b_out, _ = fusion.external_bytes(ops)
    assert b_in == (3072 + T * 768 + 768 * 3072) * 2 and b_out == T * 3072 * 2


def test_a_call_with_an_unsized_operator_has_no_fusion_floor():
    ops = {1: {"op_id": 1, "op": "aten::_foreach_mul_", "input_dims": "[[],[]]",
               "input_types": '["TensorList","Scalar"]', "concrete": None},
           2: {"op_id": 2, "op": "aten::add", "input_dims": "[[4],[4]]", "input_types": '["float","float"]',
               "concrete": None}}
    assert fusion.floor([{"kernel_id": 1}, {"kernel_id": 2}], ops, 1e12, "NVIDIA H100 80GB HBM3") is None
    ops[1] = {**ops[2], "op_id": 3, "op": "aten::mul"}
    f = fusion.floor([{"kernel_id": 1}, {"kernel_id": 2}], ops, 1e12, "NVIDIA H100 80GB HBM3")
    assert f is not None and f[2] == 4 * 4 * 2 + 4 * 4  # a and b in, the last op's output out


def test_upcast_log_softmax_nll_reads_the_logits_once():
    # logits.float() into a new tensor (copy_ writes its first argument), a reshaped view of it
    # into log_softmax, then nll_loss (mean: one scalar out): fused, the bf16 logits in, 4 B out
    ops = [("aten::copy_", [t(8, 512, 8192, dtype=F32), t(8, 512, 8192), s(False)]),
           ("aten::_log_softmax", [t(4096, 8192, dtype=F32), s(1), s(False)]),
           ("aten::nll_loss_forward", [t(4096, 8192, dtype=F32), t(4096, dtype="long int"), Operand(), s(1),
                                       s(-100)])]
    b_in, b_out, _ = fusion.external_bytes(ops)
    assert b_in == 8 * 512 * 8192 * 2 + 4096 * 8 and b_out == 4


def test_a_library_gemm_is_a_fusion_boundary_at_its_measured_time():
    # gelu(x @ w.T + b) as eager runs it: the GEMM keeps its own time (cuBLAS fuses nothing and
    # fusion does not speed it up); add + gelu fuse into one kernel reading the product and b
    def op(i, name, dims, types):
        return {"op_id": i, "op": name, "input_dims": json.dumps(dims), "input_types": json.dumps(types),
                "concrete": None}
    ops = {1: op(1, "aten::mm", [[8192, 1024], [1024, 4096]], [BF16, BF16]),
           2: op(2, "aten::add", [[8192, 4096], [4096], []], [BF16, BF16, "Scalar"]),
           3: op(3, "aten::gelu", [[8192, 4096], []], [BF16, "Scalar"])}
    call = [{"kernel_id": 1, "duration_ns": 94_500}, {"kernel_id": 2, "duration_ns": 88_000},
            {"kernel_id": 3, "duration_ns": 47_000}]
    bw = 3.35e12
    ns, how, _ = fusion.floor(call, ops, bw, "NVIDIA H100 80GB HBM3")
    epilogue = (8192 * 4096 * 2 + 4096 * 2 + 8192 * 4096 * 2) / bw * 1e9
    assert abs(ns - (94_500 + epilogue)) < 1 and "library kernel" in how
    # without durations the GEMM's FLOPs at the datasheet bf16 peak stand in
    ns2, how2, _ = fusion.floor([{"kernel_id": k} for k in (1, 2, 3)], ops, bw, "NVIDIA H100 80GB HBM3")
    assert ns2 < ns and "FLOPs at peak" in how2


def test_an_emit_nvtx_export_advises_the_programs_ranges_at_their_fusion_floor(tmp_path):
    """The H100 capture of benchmarks/programs/fusion_ops.py under emit_nvtx(record_shapes=True)
    (tests/data/opmodel-h100), ingested as the plain nsys export a user has: operator ranges
    are named as operators are called, the ops table holds their tensor identity, and advise's
    items are the program's ranges, each at its fusion floor."""
    import lzma

    from profdata import DATA
    from profkit.analyses import advise
    from profkit.parsers import nsys_sqlite
    from profkit.store.ingest import ingest
    from profkit.store.store import Store

    src = tmp_path / "fusion.nsys.sqlite"
    src.write_bytes(lzma.decompress((DATA / "opmodel-h100" / "fusion-torch-ranges.nsys.sqlite.xz").read_bytes()))
    conn = nsys_sqlite._open(src)
    try:  # however large, such an export takes the row path, which builds the ops table
        assert nsys_sqlite._torch_shapes(conn, nsys_sqlite._tables(conn))
    finally:
        conn.close()
    db = tmp_path / "p.db"
    ingest(db, [src], run="shapes")
    with Store(db) as s:
        assert not s.query("SELECT 1 FROM kernels WHERE nvtx_path LIKE '%op_id =%' LIMIT 1")
        assert s.query("SELECT count(*) n FROM op_row WHERE torch_op_id IS NOT NULL")[0]["n"] > 100
        items = {i.nvtx_path: i for i in advise.advise(s, "shapes", phase="all").items if i.kind == "range"}
    for block, floor_us in (("rmsnorm.eager", 40.1), ("gelu_epilogue.eager", 137.5), ("add_layernorm.eager", 40.1)):
        assert f"floor {floor_us} us" in items[block].how and "from tensor identity" in items[block].how
    assert not any("aten::" in p for p in items)
