"""An ordinary PyTorch training loop that profkit never saw: torchvision ResNet-18 on a synthetic
ImageNet-sized batch, bf16 autocast, SGD with momentum. No NVTX ranges of its own unless asked.

    python3 resnet_train.py [--steps 5] [--batch 64] [--nvtx-steps] [--profiler-api-step N]

--nvtx-steps marks each step with an NVTX range 'step N' (for `profkit capture --step N`);
--profiler-api-step N calls cudaProfilerStart/Stop around step N only.
Used by benchmarks/gpu/capture_programs.sh (benchmarks/results/capture.md).
"""
import argparse
import contextlib
import time

import torch
import torch.nn.functional as F
import torchvision


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--nvtx-steps", action="store_true")
    p.add_argument("--profiler-api-step", type=int, default=None)
    a = p.parse_args()
    torch.manual_seed(0)
    model = torchvision.models.resnet18(num_classes=1000).cuda().to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x = torch.randn(a.batch, 3, 224, 224, device="cuda").to(memory_format=torch.channels_last)
    y = torch.randint(0, 1000, (a.batch,), device="cuda")
    t0 = time.perf_counter()
    for step in range(a.steps):
        if a.profiler_api_step == step:
            torch.cuda.synchronize()
            torch.cuda.profiler.start()
        rng = torch.cuda.nvtx.range(f"step {step}") if a.nvtx_steps else contextlib.nullcontext()
        with rng:
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = F.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        if a.profiler_api_step == step:
            torch.cuda.synchronize()
            torch.cuda.profiler.stop()
    torch.cuda.synchronize()
    print(f"resnet18 train: {a.steps} steps, batch {a.batch}, loss {loss.item():.3f}, "
          f"{time.perf_counter() - t0:.2f} s in the loop")


if __name__ == "__main__":
    main()
