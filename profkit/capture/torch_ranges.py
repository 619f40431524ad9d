"""Run a Python program with PyTorch emitting one NVTX range per operator it calls.

    python3 torch_ranges.py SCRIPT [ARGS...]
    python3 torch_ranges.py -m MODULE [ARGS...]

`profkit capture --torch-ranges -- python3 train.py` runs the program through this file: the
user's file stays as it is. Inside `torch.autograd.profiler.emit_nvtx()` every operator call
(forward, and backward on autograd's threads) and every `record_function` block becomes an NVTX
range, so each kernel lands under the operator that launched it. PyTorch appends per-call ids
and the input sizes to each name ("aten::addmm, seq = 12, op_id = 345, sizes = [[3072], [8, 768],
[768, 3072], [], []]"); profkit capture keeps the sizes as the run's operator table (the ops
view) and strips the suffix from the range names when loading.

Run by path, not as `-m profkit.capture.torch_ranges`: it imports nothing of profkit, so it works under
whatever interpreter runs the program. Its cost (a range push and pop per operator call) is in
benchmarks/results/capture.md.
"""

import os
import runpy
import sys


def main(argv):
    if not argv or (argv[0] == "-m" and len(argv) < 2):
        print("usage: python3 torch_ranges.py (SCRIPT | -m MODULE) [ARGS...]", file=sys.stderr)
        return 2
    try:
        import torch
    except ImportError as e:
        print(f"profkit --torch-ranges: this Python has no PyTorch ({e})", file=sys.stderr)
        return 2
    code = 0
    with torch.autograd.profiler.emit_nvtx(record_shapes=True):
        try:
            if argv[0] == "-m":
                sys.argv = argv[1:]
                sys.path.insert(0, os.getcwd())
                runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
            else:
                sys.argv = list(argv)
                sys.path[0] = os.path.dirname(os.path.abspath(argv[0]))  # as `python3 SCRIPT` sets it
                runpy.run_path(argv[0], run_name="__main__")
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
