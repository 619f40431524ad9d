"""The model layer's lab operators are the lab's: every lab Workload with a model points at the
formula and named shapes profkit/model/ops holds (advise reads them without importing the lab)."""
import pytest

from profkit.model.ops import lab


def test_every_lab_workload_model_is_the_model_layers():
    pytest.importorskip("triton")
    from profkit import kernels

    modelled = {op: w for op, w in kernels.workloads().items() if w.model}
    assert set(modelled) == set(lab.OPERATORS)
    for op, w in modelled.items():
        lo = lab.OPERATORS[op]
        assert w.model is lo.model, op
        assert w.shapes == lo.shapes and w.default_dtype == lo.default_dtype, op


def test_model_of_a_lab_range():
    m, how = lab.model_of("rmsnorm/eager/qwen7b-t4096", "bf16")
    assert m == {"bytes": 2 * 4096 * 3584 * 2 + 3584 * 2, "flops": 4 * 4096 * 3584}
    assert how == "rmsnorm's model at qwen7b-t4096 (bf16)"
    m, _ = lab.model_of("e2e/decode/eager/llama3-8b-l4-ctx448", None)
    assert m["flops"] > 0
    assert lab.model_of("mine/eager/shape", "bf16") == (None, "")
