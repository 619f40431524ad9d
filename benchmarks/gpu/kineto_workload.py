"""A small transformer training loop for comparing torch.profiler (Kineto) with nsys
(benchmarks/gpu/kineto_capture.sh).

What real training launches: embedding, LayerNorm, cuBLAS GEMMs, flash attention (SDPA), GELU,
cross entropy, backward on autograd's own thread, a foreach AdamW step, a torch.compile'd
function (Triton kernels, driver-API launches), work on a second stream, a CUDA graph replay,
memcpy D2H/H2D and a fill. Every range goes through both NVTX and `record_function`, with the
same names, so each tool sees the same ranges. `--window kineto FILE` profiles the measured
steps with torch.profiler and writes its chrome trace (FILE may end in .gz); `--window cuda`
brackets them with cudaProfilerStart/Stop for `nsys profile --capture-range=cudaProfilerApi`.
Warm-up (compilation, cuBLAS heuristics, graph capture) stays outside both windows.
"""
from __future__ import annotations

import argparse
import contextlib

import torch
import torch.nn as nn
import torch.nn.functional as F


@contextlib.contextmanager
def rng(name):
    torch.cuda.nvtx.range_push(name)
    with torch.profiler.record_function(name):
        yield
    torch.cuda.nvtx.range_pop()


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(a)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class LM(nn.Module):
    def __init__(self, vocab=8192, d=1024, heads=16, layers=4):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, tokens):
        x = self.emb(tokens)
        for i, blk in enumerate(self.blocks):
            with rng(f"layer{i}"):
                x = blk(x)
        return self.head(self.ln(x))


@torch.compile
def rmsnorm(x, w):
    return x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6).to(x.dtype) * w


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--window", choices=["kineto", "cuda", "none"], default="none")
    p.add_argument("--kineto", default=None, help="chrome trace to write (with --window kineto)")
    p.add_argument("--with-stack", action="store_true", help="torch.profiler with_stack (much larger traces)")
    a = p.parse_args()
    torch.manual_seed(0)
    dev = "cuda"
    model = LM().to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    tokens = torch.randint(0, 8192, (8, 512), device=dev)
    xs = torch.randn(4096, 1024, device=dev, dtype=torch.bfloat16)
    ws = torch.randn(1024, device=dev, dtype=torch.bfloat16)
    ma = torch.randn(2048, 2048, device=dev, dtype=torch.bfloat16)
    side = torch.cuda.Stream()
    gx = torch.randn(1 << 20, device=dev)

    def graph_body():
        return (gx * 2 + 1).relu_()

    def step(i, ranges=True):
        r = rng if ranges else (lambda name: contextlib.nullcontext())
        with r(f"step {i}"):
            with r("forward"), torch.autocast("cuda", dtype=torch.bfloat16):
                logits = model(tokens)
            with r("loss"):
                loss = F.cross_entropy(logits.float().view(-1, logits.shape[-1]), tokens.view(-1))
            with r("backward"):
                loss.backward()
            with r("optimizer"):
                opt.step()
                opt.zero_grad(set_to_none=True)
            with r("compiled"), torch.no_grad():
                rmsnorm(xs, ws)
            with r("side_stream"):
                side.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(side):
                    ma @ ma
                torch.cuda.current_stream().wait_stream(side)
            with r("graph"):
                graph.replay()
            with r("copy"):
                host = logits[0, :64].float().cpu()
                host.to(dev)
                torch.zeros(1 << 16, device=dev)

    # warm-up outside any window: compile, pick GEMMs, capture the graph
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        graph_body()
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        graph_body()
    for _ in range(2):
        step(-1, ranges=False)
    torch.cuda.synchronize()

    prof = None
    if a.window == "kineto":
        prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                                  torch.profiler.ProfilerActivity.CUDA],
                                      record_shapes=True, with_stack=a.with_stack)
        prof.__enter__()
    elif a.window == "cuda":
        torch.cuda.profiler.start()
    for i in range(a.steps):
        step(i)
    torch.cuda.synchronize()
    if prof is not None:
        prof.__exit__(None, None, None)
        prof.export_chrome_trace(a.kineto)
    elif a.window == "cuda":
        torch.cuda.profiler.stop()
    print("kineto workload done", flush=True)


if __name__ == "__main__":
    main()
