"""The size of a generation trace and its float64 reference with and without statistics.

A Hugging Face LlamaForCausalLM of a few million parameters (random weights, seed 0) generates greedily from a
prompt; `burnside.torch.record_generate` records it three ways: every tensor in full (``statistics=False``), the
parameters and the layers of every step but the prefill and the last as statistics (``statistics=True``, the
default from ``LAYER_STATISTICS_ABOVE`` parameters), and with every step's layers as statistics
(``full_steps=[]``). Prints the bytes of each trace and reference and the time each recording took.

    python benchmarks/forward_statistics_size.py [--hidden 256] [--layers 4] [--vocab 8000] [--steps 8]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--vocab", type=int, default=8000)
    parser.add_argument("--prompt", type=int, default=16, help="prompt tokens (batch 0)")
    parser.add_argument("--steps", type=int, default=8, help="decode steps after the prompt")
    args = parser.parse_args()

    from transformers import LlamaConfig, LlamaForCausalLM

    from burnside.torch import record_generate

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=args.vocab, hidden_size=args.hidden, intermediate_size=args.hidden * 11 // 4,
                         num_hidden_layers=args.layers, num_attention_heads=8, num_key_value_heads=4,
                         max_position_embeddings=256)
    model = LlamaForCausalLM(config).eval()
    params = sum(p.numel() for p in model.parameters())
    prompt = torch.randint(0, args.vocab, (1, args.prompt), generator=torch.Generator().manual_seed(1))
    print(f"LlamaForCausalLM: {params / 1e6:.2f} M parameters ({params * 4 / 2**20:.1f} MiB in float32), "
          f"{args.layers} layers, hidden {args.hidden}, vocab {args.vocab}; prompt {args.prompt} tokens, "
          f"{args.steps} decode steps")
    cases = [("every tensor in full", {"statistics": False}),
             ("statistics, full_steps=[0, -1] (the default when on)", {"statistics": True}),
             ("statistics, full_steps=[]", {"statistics": True, "full_steps": []})]
    with tempfile.TemporaryDirectory() as tmp:
        for i, (what, kwargs) in enumerate(cases):
            trace, reference = Path(tmp) / f"t{i}.safetensors", Path(tmp) / f"r{i}.safetensors"
            start = time.perf_counter()
            record_generate(model, prompt, trace, steps=args.steps, reference=reference, **kwargs)
            took = time.perf_counter() - start
            t, r = trace.stat().st_size, reference.stat().st_size
            print(f"{what:<55} trace {t / 2**20:8.2f} MiB   reference {r / 2**20:8.2f} MiB   "
                  f"({took:.1f} s, both)")


if __name__ == "__main__":
    main()
