"""An ordinary Hugging Face decode loop with a static KV cache, the way the transformers docs
write it for CUDA graphs: a Llama-architecture decoder from a config (random weights, no
download), bf16, one eager prefill, then greedy decode steps through transformers' StaticCache,
either eager or with the model's forward compiled by torch.compile(mode="reduce-overhead")
(Inductor + CUDA graphs). No NVTX ranges of its own unless asked.

    python3 llama_decode_static.py [--mode eager|reduce-overhead] [--prompt 128] [--warmup 8]
                                   [--decode 64] [--layers 8] [--nvtx-steps] [--device cpu]

--nvtx-steps marks each measured decode step with an NVTX range 'step N' (warm-up steps, where
compilation and graph capture happen, are left unmarked).
Used by benchmarks/gpu/programs.sh (benchmarks/results/programs.md).
"""
import argparse
import contextlib
import time

import torch
from transformers import LlamaConfig, LlamaForCausalLM, StaticCache


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--mode", choices=["eager", "reduce-overhead"], default="eager")
    p.add_argument("--prompt", type=int, default=128)
    p.add_argument("--warmup", type=int, default=8)
    p.add_argument("--decode", type=int, default=64)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--nvtx-steps", action="store_true")
    p.add_argument("--device", default="cuda")
    a = p.parse_args()
    dev = a.device
    cfg = LlamaConfig(vocab_size=32000, hidden_size=a.hidden, intermediate_size=a.hidden * 11 // 4,
                      num_hidden_layers=a.layers, num_attention_heads=16, num_key_value_heads=8,
                      max_position_embeddings=4096)
    torch.manual_seed(0)
    torch.set_default_dtype(torch.bfloat16)
    with torch.device(dev):
        model = LlamaForCausalLM(cfg).eval()
    torch.set_default_dtype(torch.float32)
    cache = StaticCache(config=cfg, max_cache_len=a.prompt + a.warmup + a.decode + 8)
    forward = model.forward
    if a.mode == "reduce-overhead":
        forward = torch.compile(model.forward, mode="reduce-overhead", fullgraph=True)

    def decode(tok, pos):
        if a.mode == "reduce-overhead":
            torch.compiler.cudagraph_mark_step_begin()
        out = forward(input_ids=tok, past_key_values=cache, cache_position=pos, position_ids=pos[None],
                      use_cache=True)
        return out.logits[:, -1:].argmax(-1).clone()

    ids = torch.randint(0, cfg.vocab_size, (a.batch, a.prompt), device=dev)
    nvtx = a.nvtx_steps and dev == "cuda"
    with torch.inference_mode():
        pos = torch.arange(a.prompt, device=dev)
        out = model(input_ids=ids, past_key_values=cache, cache_position=pos, position_ids=pos[None], use_cache=True)
        tok = out.logits[:, -1:].argmax(-1)
        t = a.prompt
        for _ in range(a.warmup):  # compilation and graph capture happen here
            tok = decode(tok, torch.tensor([t], device=dev))
            t += 1
        if dev == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        for i in range(a.decode):
            with torch.cuda.nvtx.range(f"step {i}") if nvtx else contextlib.nullcontext():
                tok = decode(tok, torch.tensor([t], device=dev))
            t += 1
        if dev == "cuda":
            torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    print(f"llama-style decoder ({a.layers} layers, {sum(p.numel() for p in model.parameters()) / 1e6:.0f} M params, "
          f"{a.mode}, static cache): prefill {a.prompt} + {a.warmup} warm-up steps, {a.decode} decode steps "
          f"in {dt:.3f} s ({dt / a.decode * 1e3:.2f} ms a step)")


if __name__ == "__main__":
    main()
