"""An ordinary PyTorch training loop that profkit never saw: torchvision ResNet-18 on a synthetic
ImageNet-sized batch, bf16 autocast, SGD with momentum, NCHW unless asked. No NVTX ranges of its
own unless asked.

    python3 resnet_train.py [--steps 5] [--batch 64] [--channels-last] [--item-every-step]
                            [--nvtx-steps] [--profiler-api-step N] [--kineto FILE --kineto-step N]

--channels-last puts the model and input in channels-last memory format;
--item-every-step reads the loss to the host every step (a host sync, as a logging loop does);
--nvtx-steps marks each step with an NVTX range 'step N' (for `profkit capture --step N`);
--profiler-api-step N calls cudaProfilerStart/Stop around step N only;
--kineto FILE writes a torch.profiler trace (record_shapes, with_flops) of step --kineto-step.
Used by benchmarks/gpu/programs.sh (benchmarks/results/programs.md) and
benchmarks/gpu/capture_programs.sh (benchmarks/results/capture.md, whose runs were channels-last:
add --channels-last to repeat them).
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
    p.add_argument("--channels-last", action="store_true")
    p.add_argument("--item-every-step", action="store_true")
    p.add_argument("--nvtx-steps", action="store_true")
    p.add_argument("--profiler-api-step", type=int, default=None)
    p.add_argument("--kineto", default=None)
    p.add_argument("--kineto-step", type=int, default=3)
    p.add_argument("--image", type=int, default=224)
    p.add_argument("--device", default="cuda")
    a = p.parse_args()
    dev = a.device
    fmt = torch.channels_last if a.channels_last else torch.contiguous_format
    torch.manual_seed(0)
    model = torchvision.models.resnet18(num_classes=1000).to(dev).to(memory_format=fmt)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x = torch.randn(a.batch, 3, a.image, a.image, device=dev).to(memory_format=fmt)
    y = torch.randint(0, 1000, (a.batch,), device=dev)
    cuda = dev == "cuda"
    losses = []
    t0 = time.perf_counter()
    for step in range(a.steps):
        if a.profiler_api_step == step:
            torch.cuda.synchronize()
            torch.cuda.profiler.start()
        prof = None
        if a.kineto and step == a.kineto_step:
            if cuda:
                torch.cuda.synchronize()
            acts = [torch.profiler.ProfilerActivity.CPU] + ([torch.profiler.ProfilerActivity.CUDA] if cuda else [])
            prof = torch.profiler.profile(activities=acts, record_shapes=True, with_flops=True)
            prof.__enter__()
        rng = torch.cuda.nvtx.range(f"step {step}") if a.nvtx_steps and cuda else contextlib.nullcontext()
        with rng:
            with torch.autocast(dev, dtype=torch.bfloat16):
                loss = F.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            if a.item_every_step:
                losses.append(loss.item())
            else:
                losses.append(loss.detach())
        if prof is not None:
            if cuda:
                torch.cuda.synchronize()
            prof.__exit__(None, None, None)
            prof.export_chrome_trace(a.kineto)
        if a.profiler_api_step == step:
            torch.cuda.synchronize()
            torch.cuda.profiler.stop()
    last = float(losses[-1])
    if cuda:
        torch.cuda.synchronize()
    print(f"resnet18 train ({'channels-last' if a.channels_last else 'NCHW'}): {a.steps} steps, batch {a.batch}, "
          f"loss {last:.3f}, {time.perf_counter() - t0:.2f} s in the loop")


if __name__ == "__main__":
    main()
