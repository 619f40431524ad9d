"""The operator model: minimum bytes and FLOPs of an operator from its shapes and dtypes, one
module per operator family, importable without torch or triton.

Two doors into it:
- the lab's operators by name and named shape (``lab.model_of``): the formulas the kernel lab's
  Workloads point at, so `advise` gives the same answer on a core install;
- PyTorch operators as a trace records them (``aten.estimate``): ``aten::addmm`` with its input
  dims, dtypes and concrete scalars -> flops, bytes and the family.

"Minimum bytes" is what one kernel must move through DRAM: every input read once and every
output written once, nothing re-read, except where the operator's own dependences force a second
read (training batch norm). "FLOPs" counts a multiply-add as two; a tiled causal attention
counts the whole tiles it computes. Checked against ncu on H100: benchmarks/results/opmodel_h100.md.
"""
