"""Plain-PyTorch reference for DeepSeek-MoE v1 (the deepseek-moe-16b layout).

transformers 5.x has no class for this model (its DeepSeek-V2/V3 classes use MLA
attention), so the golden fixtures use this file instead. It follows the
published modeling code (deepseek-ai/deepseek-moe-16b, modeling_deepseek.py):
  - Llama attention (MHA/GQA, rotate-half RoPE, optional bias per attention_bias),
  - the first `first_k_dense_replace` layers are dense MLPs (intermediate_size),
    later layers with i % moe_layer_freq == 0 are MoE,
  - MoE gate: softmax over routed experts, top-k (unsorted), renormalized only
    when norm_topk_prob is set (deepseek-moe-16b: false), no scaling factor,
  - shared experts: one MLP of moe_intermediate_size * n_shared_experts added
    to the routed output.
State-dict names match the published checkpoint (per-expert tensors).
"""
import math

import torch
import torch.nn.functional as F
from torch import nn


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class MLP(nn.Module):
    def __init__(self, hidden: int, inter: int):
        super().__init__()
        self.gate_proj = nn.Linear(hidden, inter, bias=False)
        self.up_proj = nn.Linear(hidden, inter, bias=False)
        self.down_proj = nn.Linear(inter, hidden, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Gate(nn.Module):
    def __init__(self, cfg: dict):
        super().__init__()
        self.top_k = cfg["num_experts_per_tok"]
        self.norm = cfg["norm_topk_prob"]
        self.weight = nn.Parameter(torch.empty(cfg["n_routed_experts"], cfg["hidden_size"]))

    def forward(self, x):  # x [T, H]
        scores = F.linear(x, self.weight).softmax(dim=-1)  # [T, E]
        w, idx = torch.topk(scores, k=self.top_k, dim=-1, sorted=False)  # [T, K]
        if self.top_k > 1 and self.norm:
            w = w / (w.sum(dim=-1, keepdim=True) + 1e-20)
        return idx, w


class MoE(nn.Module):
    def __init__(self, cfg: dict):
        super().__init__()
        h, inter = cfg["hidden_size"], cfg["moe_intermediate_size"]
        self.experts = nn.ModuleList([MLP(h, inter) for _ in range(cfg["n_routed_experts"])])
        self.gate = Gate(cfg)
        n_shared = cfg.get("n_shared_experts") or 0
        self.shared_experts = MLP(h, inter * n_shared) if n_shared else None

    def forward(self, x):  # x [B, L, H]
        shape = x.shape
        flat = x.reshape(-1, shape[-1])
        idx, w = self.gate(flat)
        y = torch.zeros_like(flat)
        for e, expert in enumerate(self.experts):
            tok, slot = torch.where(idx == e)
            if tok.numel():
                y.index_add_(0, tok, expert(flat[tok]) * w[tok, slot, None])
        if self.shared_experts is not None:
            y = y + self.shared_experts(flat)
        return y.reshape(shape)


class Attention(nn.Module):
    def __init__(self, cfg: dict):
        super().__init__()
        h = cfg["hidden_size"]
        self.heads = cfg["num_attention_heads"]
        self.kv_heads = cfg.get("num_key_value_heads") or self.heads
        self.head_dim = h // self.heads
        bias = bool(cfg.get("attention_bias"))
        self.q_proj = nn.Linear(h, self.heads * self.head_dim, bias=bias)
        self.k_proj = nn.Linear(h, self.kv_heads * self.head_dim, bias=bias)
        self.v_proj = nn.Linear(h, self.kv_heads * self.head_dim, bias=bias)
        self.o_proj = nn.Linear(self.heads * self.head_dim, h, bias=bias)
        d = self.head_dim
        inv = 1.0 / (cfg["rope_theta"] ** (torch.arange(0, d, 2, dtype=torch.int64).float() / d))
        self.register_buffer("inv_freq", inv, persistent=False)

    def forward(self, x):  # x [B, L, H]
        b, n, _ = x.shape
        q = self.q_proj(x).view(b, n, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, n, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, n, self.kv_heads, self.head_dim).transpose(1, 2)
        pos = torch.arange(n, dtype=torch.float32)
        freqs = torch.outer(pos, self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos(), emb.sin()
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        rep = self.heads // self.kv_heads
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
        att = (q @ k.transpose(2, 3)) / math.sqrt(self.head_dim)
        mask = torch.full((n, n), float("-inf")).triu(1)
        att = (att + mask).softmax(dim=-1, dtype=torch.float32)
        out = (att @ v).transpose(1, 2).reshape(b, n, -1)
        return self.o_proj(out)


class Layer(nn.Module):
    def __init__(self, cfg: dict, i: int):
        super().__init__()
        self.self_attn = Attention(cfg)
        moe = cfg.get("n_routed_experts") and i >= cfg["first_k_dense_replace"] and i % cfg["moe_layer_freq"] == 0
        self.mlp = MoE(cfg) if moe else MLP(cfg["hidden_size"], cfg["intermediate_size"])
        self.input_layernorm = RMSNorm(cfg["hidden_size"], cfg["rms_norm_eps"])
        self.post_attention_layernorm = RMSNorm(cfg["hidden_size"], cfg["rms_norm_eps"])

    def forward(self, x):
        x = x + self.self_attn(self.input_layernorm(x))
        return x + self.mlp(self.post_attention_layernorm(x))


class Model(nn.Module):
    def __init__(self, cfg: dict):
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg["vocab_size"], cfg["hidden_size"])
        self.layers = nn.ModuleList([Layer(cfg, i) for i in range(cfg["num_hidden_layers"])])
        self.norm = RMSNorm(cfg["hidden_size"], cfg["rms_norm_eps"])

    def forward(self, ids):
        x = self.embed_tokens(ids)
        for layer in self.layers:
            x = layer(x)
        return self.norm(x)


class DeepseekV1ForCausalLM(nn.Module):
    def __init__(self, cfg: dict):
        super().__init__()
        self.model = Model(cfg)
        self.lm_head = nn.Linear(cfg["hidden_size"], cfg["vocab_size"], bias=False)

    def forward(self, ids):  # [B, L] -> logits [B, L, V]
        return self.lm_head(self.model(ids)).float()


def config_json(cfg: dict) -> dict:
    """config.json as the published deepseek-moe-16b checkpoint spells it."""
    return {
        "architectures": ["DeepseekForCausalLM"],
        "model_type": "deepseek",
        "hidden_act": "silu",
        "torch_dtype": "float32",
        "bos_token_id": 0,
        "eos_token_id": 1,
        "rope_scaling": None,
        "scoring_func": "softmax",
        "aux_loss_alpha": 0.001,
        "seq_aux": True,
        "use_cache": True,
        **cfg,
    }
