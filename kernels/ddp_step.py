"""A small data-parallel training step for multi-GPU profiling: run it under torchrun.

    torchrun --nproc-per-node 2 -m profkit.kernels.ddp_step --steps 5
    torchrun --nproc-per-node 2 -m profkit.kernels.ddp_step --steps 5 --slow-rank 1 --slow-matmuls 8

Each rank runs an MLP of bias-free Linear + ReLU layers forward and backward on its own batch;
gradients are averaged over the ranks by an all-reduce (NCCL on GPUs, gloo on the CPU), either
by DistributedDataParallel during backward (`--comm ddp`, buckets overlap the backward
matmuls) or in one all-reduce after backward (`--comm manual`, nothing to overlap); then SGD.

Each measured step sits in a process-wide NVTX start/end range `step N` (backward kernels
are launched from autograd's device thread, which a push/pop range on the main thread would
not cover), with push/pop ranges forward / straggle / backward / allreduce / optimizer inside
it on the main thread. Warm-up steps (cuBLAS and NCCL set-up) run outside any range.
`--slow-rank R` makes rank R a straggler: it runs `--slow-matmuls` extra matmuls of the
layer's size before backward, so the other ranks wait for it in the all-reduce.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time


class _Ranges:
    """NVTX ranges in the default domain through torch (as the lab's other workloads);
    nothing on a CPU-only build, whose torch.cuda.nvtx has no library behind it."""

    def __init__(self, on: bool):
        import torch

        self.nvtx = torch.cuda.nvtx if on else None

    @contextlib.contextmanager
    def push(self, name: str):
        if self.nvtx:
            self.nvtx.range_push(name)
        try:
            yield
        finally:
            if self.nvtx:
                self.nvtx.range_pop()

    def start(self, name: str):
        return self.nvtx.range_start(name) if self.nvtx else None

    def end(self, handle) -> None:
        if self.nvtx:
            self.nvtx.range_end(handle)


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m profkit.kernels.ddp_step", description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=5, help="measured steps, each in NVTX range 'step N'")
    p.add_argument("--warmup", type=int, default=2, help="steps before the first range")
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--hidden", type=int, default=4096)
    p.add_argument("--tokens", type=int, default=8192, help="rows of each rank's batch")
    p.add_argument(
        "--dtype", choices=("bf16", "fp16", "fp32"), default=None, help="default: bf16 on GPUs, fp32 on the CPU"
    )
    p.add_argument("--comm", choices=("ddp", "manual"), default="ddp")
    p.add_argument("--bucket-mb", type=float, default=25.0, help="DDP bucket size")
    p.add_argument("--slow-rank", type=int, default=None, help="rank that straggles")
    p.add_argument("--slow-matmuls", type=int, default=8, help="extra matmuls the slow rank runs per step")
    p.add_argument("--backend", choices=("nccl", "gloo"), default=None, help="default: nccl on GPUs, else gloo")
    return p.parse_args(argv)


def main(argv=None) -> int:
    import torch
    import torch.distributed as dist

    a = parse_args(argv)
    rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    local = int(os.environ.get("LOCAL_RANK", rank))
    cuda = torch.cuda.is_available() and a.backend != "gloo"
    device = torch.device(f"cuda:{local}" if cuda else "cpu")
    if cuda:
        torch.cuda.set_device(device)
    dist.init_process_group(
        a.backend or ("nccl" if cuda else "gloo"),
        rank=rank,
        world_size=world,
        device_id=device if cuda else None,
    )
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[
        a.dtype or ("bf16" if cuda else "fp32")
    ]

    torch.manual_seed(0)  # the same initial weights everywhere (DDP broadcasts rank 0's anyway)
    layers = []
    for _ in range(a.layers):
        layers += [torch.nn.Linear(a.hidden, a.hidden, bias=False), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers).to(device=device, dtype=dtype)
    net: torch.nn.Module
    if a.comm == "ddp":
        net = torch.nn.parallel.DistributedDataParallel(
            model, device_ids=[local] if cuda else None, bucket_cap_mb=a.bucket_mb
        )
    else:
        net = model
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    gen = torch.Generator(device=device).manual_seed(1 + rank)  # each rank its own batch
    x = torch.randn(a.tokens, a.hidden, device=device, dtype=dtype, generator=gen)
    slow = a.slow_rank is not None and rank == a.slow_rank
    nvtx = _Ranges(cuda)
    _push = nvtx.push
    w = torch.randn(a.hidden, a.hidden, device=device, dtype=dtype, generator=gen) / a.hidden**0.5 if slow else None

    def sync():
        if cuda:
            torch.cuda.synchronize(device)

    def step():
        with _push("forward"):
            loss = net(x).float().pow(2).mean()
        if slow:
            with _push("straggle"):  # extra work before backward: the others wait in the all-reduce
                y = x
                for _ in range(a.slow_matmuls):
                    y = y @ w
        with _push("backward"):
            loss.backward()
        if a.comm == "manual":
            with _push("allreduce"):
                grads = [p.grad for p in model.parameters()]
                flat = torch.cat([g.reshape(-1) for g in grads])
                dist.all_reduce(flat)
                flat /= world
                for g, v in zip(grads, flat.split([g.numel() for g in grads])):
                    g.copy_(v.view_as(g))
        with _push("optimizer"):
            opt.step()
            opt.zero_grad(set_to_none=True)
        return loss

    for _ in range(a.warmup):
        step()
    sync()
    dist.barrier()
    times = []
    for i in range(a.steps):
        t0 = time.perf_counter()
        r = nvtx.start(f"step {i}")
        step()
        sync()  # the step's GPU work ends inside its range (as a logged loss.item() would)
        nvtx.end(r)
        times.append(time.perf_counter() - t0)

    # the ranks must hold the same weights after averaged updates
    check = torch.stack([p.detach().float().sum() for p in model.parameters()])
    lo, hi = check.clone(), check.clone()
    dist.all_reduce(lo, op=dist.ReduceOp.MIN)
    dist.all_reduce(hi, op=dist.ReduceOp.MAX)
    in_sync = bool(torch.equal(lo, hi))
    # one write per line: ranks share the launcher's stdout, and print's separate "\n" write
    # let two ranks' lines run together
    sys.stdout.write(
        f"rank {rank}/{world} {device} {a.comm} slow={slow} steps={a.steps} "
        f"mean_step_ms={1e3 * sum(times) / max(len(times), 1):.3f} params_in_sync={in_sync}\n"
    )
    sys.stdout.flush()
    dist.destroy_process_group()
    return 0 if in_sync else 1


if __name__ == "__main__":
    sys.exit(main())
