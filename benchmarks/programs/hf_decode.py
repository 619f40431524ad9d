"""An ordinary Hugging Face transformers program that profkit never saw: a Llama-architecture
decoder built from a config with random weights (no download), bf16 on the GPU, one prefill of a
prompt and a few greedy decode steps through the KV cache. No NVTX ranges of its own unless asked.

    python3 hf_decode.py [--prompt 512] [--decode 8] [--layers 8] [--nvtx]

--nvtx marks 'prefill' and 'decode N' with NVTX ranges (for `profkit capture --range prefill`).
Used by benchmarks/gpu/capture_programs.sh (benchmarks/results/capture.md).
"""
import argparse
import contextlib
import time

import torch
from transformers import LlamaConfig, LlamaForCausalLM


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--prompt", type=int, default=512)
    p.add_argument("--decode", type=int, default=8)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--nvtx", action="store_true")
    p.add_argument("--device", default="cuda")
    a = p.parse_args()
    cfg = LlamaConfig(vocab_size=32000, hidden_size=1024, intermediate_size=2816, num_hidden_layers=a.layers,
                      num_attention_heads=16, num_key_value_heads=8, max_position_embeddings=4096)
    torch.manual_seed(0)
    torch.set_default_dtype(torch.bfloat16)
    with torch.device(a.device):
        model = LlamaForCausalLM(cfg).eval()
    torch.set_default_dtype(torch.float32)

    def rng(name):
        return torch.cuda.nvtx.range(name) if a.nvtx and a.device == "cuda" else contextlib.nullcontext()

    ids = torch.randint(0, cfg.vocab_size, (a.batch, a.prompt), device=a.device)
    t0 = time.perf_counter()
    with torch.inference_mode():
        with rng("prefill"):
            out = model(ids, use_cache=True)
        past, nxt = out.past_key_values, out.logits[:, -1:].argmax(-1)
        for i in range(a.decode):
            with rng(f"decode {i}"):
                out = model(nxt, past_key_values=past, use_cache=True)
            past, nxt = out.past_key_values, out.logits[:, -1:].argmax(-1)
    if a.device == "cuda":
        torch.cuda.synchronize()
    print(f"llama-style decoder ({a.layers} layers, {sum(p.numel() for p in model.parameters()) / 1e6:.0f} M params): "
          f"prefill {a.prompt} tokens + {a.decode} decode steps, {time.perf_counter() - t0:.2f} s")


if __name__ == "__main__":
    main()
