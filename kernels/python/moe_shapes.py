"""MoE shapes and routings shared by the GPU tests and the benchmark (issue 5).

Legend: H hidden, I expert intermediate, E experts, k top-k, T tokens, M = T*k routed rows.
"""
import torch

# name: (H, I, E, k)
SHAPES = {
    "olmoe": (2048, 1024, 64, 8),
    "qwen3-30b-a3b": (2048, 768, 128, 8),
    "mixtral-8x7b": (4096, 14336, 8, 2),
    "deepseek-v3": (7168, 2048, 256, 8),
    "deepseek-moe-16b": (2048, 1408, 64, 6),
}
TOKENS = [1, 8, 64, 256, 1024, 4096, 16384]
ROUTINGS = ["uniform", "zipf"]


def projections(H, I):
    """(name, N, K) of the two expert GEMMs."""
    return [("gate_up", 2 * I, H), ("down", H, I)]


def route(T, E, k, kind, gen):
    """ids [T, k] int32: k distinct experts per token; zipf makes low-index experts hot."""
    if kind == "uniform":
        p = torch.ones(E, device="cuda")
    else:
        p = 1.0 / torch.arange(1, E + 1, device="cuda", dtype=torch.float32) ** 1.2
    return torch.multinomial(p.expand(T, E), k, replacement=False, generator=gen).to(torch.int32)


def group_rows(ids, E):
    """Contiguous layout from ids: (order [M] slot indices sorted by expert, counts [E], offsets [E+1])."""
    flat = ids.flatten().long()
    order = torch.argsort(flat, stable=True)
    counts = torch.bincount(flat, minlength=E).to(torch.int32)
    offsets = torch.zeros(E + 1, dtype=torch.int32, device=ids.device)
    offsets[1:] = torch.cumsum(counts, 0)
    return order, counts, offsets


def contiguous_case(model, proj, T, gen, routing="uniform"):
    """One projection of a shape at T tokens, contiguous layout: random bf16 weights W [E, N, K], token rows X
    [T * k, K] grouped by expert (offsets), an empty output Y [T * k, N]."""
    H, I, E, k = SHAPES[model]
    N, K = (2 * I, H) if proj == "gate_up" else (H, I)
    W = torch.randn(E, N, K, dtype=torch.bfloat16, device="cuda", generator=gen)
    _, _, offsets = group_rows(route(T, E, k, routing, gen), E)
    X = torch.randn(T * k, K, dtype=torch.bfloat16, device="cuda", generator=gen)
    Y = torch.empty(T * k, N, dtype=torch.bfloat16, device="cuda")
    return W, X, Y, offsets


def row_tiles(counts, half_tails=True, swap_tails=False):
    """128-row tiles the prefill (contiguous) kernel runs for these rows per expert, a tail of <= 64 rows as half a
    tile with half_tails: its MMA work, against rows / 128 for a dense GEMM of the same rows (session 21). With
    swap_tails (session 22) a tail of <= 32 rows costs its 16- or 32-wide swapped MMA: 1/8 or 1/4 of a tile."""
    tiles = 0.0
    for c in counts:
        whole, rem = divmod(int(c), 128)
        if rem == 0:
            tiles += whole
        elif swap_tails and rem <= 32:
            tiles += whole + (0.125 if rem <= 16 else 0.25)
        else:
            tiles += whole + (0.5 if half_tails and rem <= 64 else 1)
    return tiles


def ref_grouped(X, W, offsets, scales=None):
    """fp32 reference: Y[rows of e] = X[rows of e] @ W[e]^T (* scales[e])."""
    off = offsets.tolist()
    Y = torch.zeros(X.shape[0], W.shape[1], dtype=torch.float32, device=X.device)
    for e in range(W.shape[0]):
        a, b = off[e], off[e + 1]
        if b > a:
            w = W[e].float() if scales is None else W[e].float() * scales[e].float()[:, None]
            Y[a:b] = X[a:b].float() @ w.t()
    return Y


def rel_err(y, ref):
    y = y.float()
    if not torch.isfinite(y).all():
        return float("inf")
    return (torch.linalg.vector_norm(y - ref) / torch.linalg.vector_norm(ref).clamp_min(1e-30)).item()
