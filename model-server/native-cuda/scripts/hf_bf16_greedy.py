"""Greedy continuations from transformers in bf16 on the GPU, for the CUDA backend's agreement check.

For each golden fixture transformers can load (Mixtral, Qwen2-MoE, Qwen3-MoE, OLMoE; DeepSeek-MoE v1
has no class there), runs each fixture prompt and greedily decodes N tokens with the KV cache, EOS
ignored, recording the top-2 logit gap at every step (a small gap = a near-tie where bf16 rounding
may pick the other token). Writes JSON {arch: [{prompt, tokens, gaps}]}.

  python3 model-server/native-cuda/scripts/hf_bf16_greedy.py --out /tmp/hf.json --tokens 64
"""
import argparse
import json
import os

import torch
from transformers import AutoModelForCausalLM

ROOT = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "golden")
ARCHS = ["mixtral", "qwen2_moe", "qwen3_moe", "olmoe"]


@torch.no_grad()
def greedy(model, prompt, n):
    ids = torch.tensor([prompt], device="cuda")
    out = model(input_ids=ids, use_cache=True)
    past, logits = out.past_key_values, out.logits[0, -1].float()
    tokens, gaps = [], []
    for _ in range(n):
        top = torch.topk(logits, 2)
        tok = int(top.indices[0])
        tokens.append(tok)
        gaps.append(float(top.values[0] - top.values[1]))
        out = model(input_ids=torch.tensor([[tok]], device="cuda"), past_key_values=past, use_cache=True)
        past, logits = out.past_key_values, out.logits[0, -1].float()
    return tokens, gaps


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--tokens", type=int, default=64)
    a = ap.parse_args()
    result = {}
    for arch in ARCHS:
        d = os.path.join(ROOT, arch)
        model = AutoModelForCausalLM.from_pretrained(d, dtype=torch.bfloat16).cuda().eval()
        cases = json.load(open(os.path.join(d, "golden.json")))["cases"]
        result[arch] = []
        for c in cases:
            tokens, gaps = greedy(model, c["prompt"], a.tokens)
            result[arch].append({"prompt": c["prompt"], "tokens": tokens, "gaps": gaps})
        print(f"[hf-bf16] {arch}: {len(cases)} prompts x {a.tokens} tokens", flush=True)
    json.dump(result, open(a.out, "w"))


if __name__ == "__main__":
    main()
