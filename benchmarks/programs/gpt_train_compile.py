"""An ordinary torch.compile training program that profkit never saw: a GPT-2-shaped decoder
(6 layers, d_model 768, 12 heads, vocabulary 50257) on random tokens, bf16 autocast, SDPA
attention, fused AdamW; a few compiled training steps, then greedy decoding of the same model in
eager mode (plain recompute of the whole context, no KV cache). No NVTX ranges of its own unless
asked.

    python3 gpt_train_compile.py [--steps 4] [--decode 24] [--batch 8] [--seq 512] [--eager]
                                 [--nvtx-steps] [--kineto FILE --kineto-step N] [--profile-step N]
                                 [--device cpu]

--eager trains without torch.compile (the operator-level view: aten ops with their shapes);
--nvtx-steps marks each training step with an NVTX range 'step N' (for ncu's --nvtx-include);
--kineto FILE writes a torch.profiler trace (record_shapes, with_flops) of step --kineto-step.
--profile-step N brackets step N with cudaProfilerStart/Stop (ncu --profile-from-start off): all
threads' launches, the autograd thread's backward too, which an NVTX push/pop range does not hold.
Used by benchmarks/gpu/programs.sh (benchmarks/results/programs.md).
"""
import argparse
import contextlib
import time

import torch
import torch.nn.functional as F
from torch import nn


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.out = nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, vocab, d, heads, layers, ctx):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(ctx, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.tok.weight  # tied, as GPT-2
        for m in self.modules():  # GPT-2's initialisation
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.ln(x))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--decode", type=int, default=24)
    p.add_argument("--prompt", type=int, default=64)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=512)
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--d-model", type=int, default=768)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--vocab", type=int, default=50257)
    p.add_argument("--eager", action="store_true")
    p.add_argument("--nvtx-steps", action="store_true")
    p.add_argument("--kineto", default=None)
    p.add_argument("--kineto-step", type=int, default=2)
    p.add_argument("--profile-step", type=int, default=None)
    p.add_argument("--device", default="cuda")
    a = p.parse_args()
    dev = a.device
    torch.manual_seed(0)
    model = GPT(a.vocab, a.d_model, a.heads, a.layers, max(a.seq, a.prompt + a.decode)).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, fused=dev == "cuda")
    step_fn = model if a.eager else torch.compile(model)
    x = torch.randint(0, a.vocab, (a.batch, a.seq), device=dev)
    y = torch.randint(0, a.vocab, (a.batch, a.seq), device=dev)
    nvtx = dev == "cuda" and a.nvtx_steps

    def train_step():
        with torch.autocast(dev, dtype=torch.bfloat16):
            logits = step_fn(x)
            loss = F.cross_entropy(logits.view(-1, logits.shape[-1]).float(), y.view(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    t0 = time.perf_counter()
    for step in range(a.steps):
        prof = None
        if a.kineto and step == a.kineto_step:
            if dev == "cuda":
                torch.cuda.synchronize()
            acts = [torch.profiler.ProfilerActivity.CPU] + ([torch.profiler.ProfilerActivity.CUDA] if dev == "cuda" else [])
            prof = torch.profiler.profile(activities=acts, record_shapes=True, with_flops=True)
            prof.__enter__()
        bracket = dev == "cuda" and step == a.profile_step
        if bracket:
            torch.cuda.synchronize()
            torch.cuda.profiler.start()
        with torch.cuda.nvtx.range(f"step {step}") if nvtx else contextlib.nullcontext():
            loss = train_step()
        if bracket:
            torch.cuda.synchronize()
            torch.cuda.profiler.stop()
        if prof is not None:
            if dev == "cuda":
                torch.cuda.synchronize()
            prof.__exit__(None, None, None)
            prof.export_chrome_trace(a.kineto)
    train_s = time.perf_counter() - t0

    # greedy decoding in eager mode, as a quick sample after training: the whole context again each token
    model.eval()
    ctx = torch.randint(0, a.vocab, (1, a.prompt), device=dev)
    t1 = time.perf_counter()
    with torch.no_grad(), torch.autocast(dev, dtype=torch.bfloat16):
        for _ in range(a.decode):
            nxt = model(ctx)[:, -1].argmax(-1, keepdim=True)
            ctx = torch.cat([ctx, nxt], dim=1)
    if dev == "cuda":
        torch.cuda.synchronize()
    print(f"gpt ({a.layers} layers, d {a.d_model}, {sum(p.numel() for p in model.parameters()) / 1e6:.0f} M params, "
          f"{'eager' if a.eager else 'compiled'}): {a.steps} steps of {a.batch}x{a.seq} in {train_s:.2f} s, "
          f"loss {loss.item():.3f}; {a.decode} decode tokens in {time.perf_counter() - t1:.2f} s")


if __name__ == "__main__":
    main()
