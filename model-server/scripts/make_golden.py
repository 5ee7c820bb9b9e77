#!/usr/bin/env python3
"""Golden fixtures for the model server's correctness tests.

Builds one tiny random-weight model per architecture with a fixed seed, saves it
in Hugging Face layout (config.json + safetensors), and records what the
reference implementation computes:
  - logits at every position of 3 prompts (fp32, CPU, eager attention),
  - greedy 32-token continuations of each prompt.

Mixtral, Qwen2-MoE, Qwen3-MoE and OLMoE come from transformers
(`AutoConfig.for_model` + `AutoModelForCausalLM.from_config`). DeepSeek-MoE v1
(the deepseek-moe-16b layout) has no class in transformers 5.x, so its
reference is `deepseek_v1_ref.py` beside this file: plain PyTorch written from
the published modeling code (deepseek-ai/deepseek-moe-16b, modeling_deepseek.py).

    python3 make_golden.py --out ../fixtures/golden

Output per architecture: <out>/<arch>/{config.json, *.safetensors, golden.json,
expected.safetensors}. expected.safetensors holds `logits.<i>` [L_i, V] fp32.
"""
import argparse
import json
import os
import sys
import time
import traceback

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

SEED = 1234
VOCAB = 256
PROMPT_LENGTHS = (6, 13, 22)
CONTINUATION = 32
INIT_STD = 0.15  # wide enough that router top-k choices are far from ties

COMMON = dict(
    vocab_size=VOCAB,
    hidden_size=32,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=128,
    rms_norm_eps=1e-6,
    tie_word_embeddings=False,
)

# Each tiny config exercises what makes its architecture different.
HF_ARCHS = {
    # 4 experts top-2, renormalized; GQA.
    "mixtral": dict(COMMON, num_hidden_layers=2, intermediate_size=24, num_local_experts=4, num_experts_per_tok=2),
    # Shared expert with sigmoid gate, no renormalization, qkv bias, one dense layer (mlp_only_layers).
    "qwen2_moe": dict(
        COMMON,
        num_hidden_layers=3,
        intermediate_size=40,
        moe_intermediate_size=16,
        shared_expert_intermediate_size=24,
        num_experts=8,
        num_experts_per_tok=2,
        norm_topk_prob=False,
        decoder_sparse_step=1,
        mlp_only_layers=[1],
        qkv_bias=True,
    ),
    # Per-head q/k RMSNorm, head_dim != hidden/heads, renormalized top-k, tied embeddings.
    "qwen3_moe": dict(
        COMMON,
        num_hidden_layers=2,
        head_dim=16,
        intermediate_size=40,
        moe_intermediate_size=16,
        num_experts=8,
        num_experts_per_tok=3,
        norm_topk_prob=True,
        decoder_sparse_step=1,
        mlp_only_layers=[],
        tie_word_embeddings=True,
    ),
    # q/k RMSNorm over the whole projection, no renormalization.
    "olmoe": dict(
        COMMON,
        num_hidden_layers=2,
        intermediate_size=16,
        num_experts=8,
        num_experts_per_tok=2,
        norm_topk_prob=False,
    ),
}

DEEPSEEK = dict(
    COMMON,
    num_key_value_heads=4,
    num_hidden_layers=3,
    intermediate_size=48,
    moe_intermediate_size=12,
    n_routed_experts=8,
    n_shared_experts=2,
    num_experts_per_tok=3,
    first_k_dense_replace=1,
    moe_layer_freq=1,
    norm_topk_prob=False,
    scoring_func="softmax",
    rope_theta=10000.0,
    attention_bias=False,
)


def perturb_(model: torch.nn.Module, gen: torch.Generator) -> None:
    """Random everything (norm weights near 1, not exactly 1) so every tensor matters."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1 and "norm" in name:
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=gen))
            elif p.dim() == 1:
                p.copy_(0.1 * torch.randn(p.shape, generator=gen))
            else:
                p.copy_(INIT_STD * torch.randn(p.shape, generator=gen))


def prompts() -> list[list[int]]:
    gen = torch.Generator().manual_seed(SEED + 7)
    return [torch.randint(0, VOCAB, (n,), generator=gen).tolist() for n in PROMPT_LENGTHS]


@torch.no_grad()
def record(forward, out_dir: str, extra: dict) -> dict:
    """forward(ids [1, L] long) -> logits [1, L, V] fp32. Writes golden.json + expected.safetensors."""
    from safetensors.torch import save_file

    tensors = {}
    cases = []
    for i, p in enumerate(prompts()):
        logits = forward(torch.tensor([p]))[0].float()
        tensors[f"logits.{i}"] = logits.contiguous()
        seq = list(p)
        margins = []
        for _ in range(CONTINUATION):
            last = forward(torch.tensor([seq]))[0, -1].float()
            top2 = torch.topk(last, 2).values
            margins.append(float(top2[0] - top2[1]))
            seq.append(int(last.argmax()))
        cases.append({"prompt": p, "greedy": seq[len(p):], "minTop2Margin": min(margins)})
    save_file(tensors, os.path.join(out_dir, "expected.safetensors"))
    golden = {"seed": SEED, "dtype": "float32", "cases": cases, **extra}
    with open(os.path.join(out_dir, "golden.json"), "w") as f:
        json.dump(golden, f, indent=1)
    return golden


def make_hf(arch: str, cfg: dict, out_root: str) -> str:
    from transformers import AutoConfig, AutoModelForCausalLM
    import transformers

    torch.manual_seed(SEED)
    config = AutoConfig.for_model(arch, **cfg)
    model = AutoModelForCausalLM.from_config(config, attn_implementation="eager").float()
    model.eval()
    perturb_(model, torch.Generator().manual_seed(SEED))
    if cfg.get("tie_word_embeddings"):
        model.lm_head.weight = model.model.embed_tokens.weight
    out = os.path.join(out_root, arch)
    os.makedirs(out, exist_ok=True)
    # OLMoE is saved in several shards (with an index) so the sharded path is tested too.
    shard = "60KB" if arch == "olmoe" else "50MB"
    model.save_pretrained(out, safe_serialization=True, max_shard_size=shard)
    if arch == "mixtral":
        # The in-memory layout (may differ from what save_pretrained writes: fused experts).
        from safetensors.torch import save_file

        fused = os.path.join(out_root, "mixtral-memory-layout")
        os.makedirs(fused, exist_ok=True)
        sd = {k: v.contiguous() for k, v in model.state_dict().items()}
        save_file(sd, os.path.join(fused, "model.safetensors"), metadata={"format": "pt"})
        with open(os.path.join(out, "config.json")) as f:
            cfg_json = f.read()
        with open(os.path.join(fused, "config.json"), "w") as f:
            f.write(cfg_json)
    golden = record(
        lambda ids: model(input_ids=ids).logits,
        out,
        {"reference": f"transformers {transformers.__version__} {type(model).__name__}"},
    )
    keys = sorted(model.state_dict().keys())
    files = sorted(os.listdir(out))
    return f"{arch}: files={files} memkeys[:6]={keys[:6]} margins={[c['minTop2Margin'] for c in golden['cases']]}"


def make_deepseek(out_root: str) -> str:
    from deepseek_v1_ref import DeepseekV1ForCausalLM, config_json
    from safetensors.torch import save_file

    torch.manual_seed(SEED)
    model = DeepseekV1ForCausalLM(DEEPSEEK).eval()
    perturb_(model, torch.Generator().manual_seed(SEED))
    out = os.path.join(out_root, "deepseek_moe")
    os.makedirs(out, exist_ok=True)
    sd = {k: v.contiguous() for k, v in model.state_dict().items()}
    save_file(sd, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(config_json(DEEPSEEK), f, indent=1)
    golden = record(
        lambda ids: model(ids),
        out,
        {"reference": "plain PyTorch reference (model-server/scripts/deepseek_v1_ref.py) after deepseek-ai modeling_deepseek.py"},
    )
    return f"deepseek_moe: keys={len(sd)} margins={[c['minTop2Margin'] for c in golden['cases']]}"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", default="")
    args = ap.parse_args()
    torch.set_default_dtype(torch.float32)
    os.makedirs(args.out, exist_ok=True)
    failed = 0
    wanted = set(args.only.split(",")) if args.only else None
    jobs = [(a, lambda a=a: make_hf(a, HF_ARCHS[a], args.out)) for a in HF_ARCHS]
    jobs.append(("deepseek_moe", lambda: make_deepseek(args.out)))
    for name, job in jobs:
        if wanted and name not in wanted:
            continue
        t0 = time.time()
        try:
            print(f"[golden] {job()} ({time.time() - t0:.1f}s)", flush=True)
        except Exception:
            failed += 1
            print(f"[golden] {name} FAILED", flush=True)
            traceback.print_exc()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
