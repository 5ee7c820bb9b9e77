"""ctypes access to kernels/build/libdispatch_kernels.so for the GPU-machine harnesses (tests,
benchmarks). Tensors are torch CUDA tensors; every launch goes on torch's current stream, so
these calls can be captured in a torch.cuda.CUDAGraph.

Legend: T tokens, E experts, k top-k, M routed rows, N outputs, K inputs, H hidden.
"""
import contextlib
import ctypes
import os

import torch

_LIB = None


def load(path=None):
    global _LIB
    path = path or os.path.join(os.path.dirname(__file__), "..", "build", "libdispatch_kernels.so")
    _LIB = ctypes.CDLL(os.path.abspath(path))
    _LIB.dk_last_error.restype = ctypes.c_char_p
    return _LIB


def _p(t):
    return ctypes.c_void_p(0 if t is None else t.data_ptr())


def _stream():
    return ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)


def _call(name, *args):
    rc = getattr(_LIB, name)(*args)
    if rc != 0:
        raise RuntimeError(f"{name}: {_LIB.dk_last_error().decode()}")


def set_small_m_depth(depth):
    """Benchmark knob: chunks in flight per warp in the small-M kernel (0 = default policy)."""
    _LIB.dk_set_small_m_depth(ctypes.c_int(depth))


def set_small_m_rb(rb):
    """Benchmark knob: row blocks per CTA in the small-M kernel (0 = automatic)."""
    _LIB.dk_set_small_m_rb(ctypes.c_int(rb))


def set_small_m_impl(impl):
    """Small-M schedule: "stream" (fixed grid, equal share per CTA), "legacy" (one expert per grid row),
    "pair" (legacy grid, two 16-row blocks per warp item) or "auto" (the library's default: legacy, pair
    for int8 on large experts at <= 8 rows per expert, where it measured faster)."""
    _LIB.dk_set_small_m_impl(ctypes.c_int({"stream": 0, "legacy": 1, "pair": 2, "auto": 3}[impl]))


def set_small_m_prefetch_mb(mb):
    """Pair schedule: L2 prefetch of the first bytes of each CTA's weight rows, at most mb MiB per launch (0 = off)."""
    _LIB.dk_set_small_m_prefetch_mb(ctypes.c_int(mb))


def set_small_m_pdl(on):
    """Programmatic Dependent Launch for the stream small-M schedule (default off)."""
    _LIB.dk_set_small_m_pdl(ctypes.c_int(int(on)))


def set_small_m_pdl_mode(mode):
    """Programmatic Dependent Launch for the legacy small-M kernel: 0 = off (default), 1 = on, honoring each
    launch's routing_ready_before_wait, 2 = on, always waiting before the routing scan."""
    _LIB.dk_set_small_m_pdl_mode(ctypes.c_int(int(mode)))


def set_contig_epilogue(mode):
    """Epilogue of the prefill (wgmma) kernels: "direct" (4-byte stores from the registers) or "staged" (through
    shared memory, 16-byte row stores, the default; same output bits); "stmatrix" stages with stmatrix; "tma" stages
    with stmatrix and stores the 64-row chunks whose rows are all the expert's with TMA (the same bits); "none" is a
    benchmark knob: the cooperative kernel writes nothing (what the epilogue costs)."""
    _LIB.dk_set_contig_epilogue(ctypes.c_int({"direct": 0, "staged": 1, "none": 2, "tma": 3, "stmatrix": 4}[mode]))


def set_contig_half_tails(mode):
    """Prefill (wgmma) kernel: an expert's last row tile of at most 64 rows runs as a 64-row tile ("on") or as a
    whole 128-row one ("off"); "auto" (the default) is "on" except for large weight tiles on few rows per expert."""
    _LIB.dk_set_contig_half_tails(ctypes.c_int({"off": 0, "on": 1, "auto": 2}[mode]))


def set_contig_dynamic(on):
    """Prefill (wgmma) kernel: tiles from an atomic counter (on, the default) or the static stride over the grid."""
    _LIB.dk_set_contig_dynamic(ctypes.c_int(int(on)))


def set_contig_pingpong(mode):
    """Prefill (wgmma) kernel: the ping-pong schedule ("on": each consumer warpgroup on its own 128 x 128 tiles, the
    staged epilogue), the cooperative kernel ("off") or "auto" (the default: ping-pong where K <= 1536)."""
    _LIB.dk_set_contig_pingpong(ctypes.c_int({"off": 0, "on": 1, "auto": 2}[mode]))


def set_contig_pairs(mode):
    """Prefill (wgmma) kernel: the ping-pong kernel in 2-CTA clusters that share each token tile ("on"; only where
    the ping-pong kernel runs and N is a multiple of 256; either schedule), single CTAs ("off") or "auto"."""
    _LIB.dk_set_contig_pairs(ctypes.c_int({"off": 0, "on": 1, "auto": 2}[mode]))


def set_contig_swap_tails(mode):
    """Prefill (wgmma) kernel: an expert's tail of at most 32 rows runs swapped (the weights as the MMA's M side, the
    tail's tokens as its N) in the expert's last whole tile or alone ("on"; the cooperative kernel with the staged
    epilogue, E <= 384), as 64- or 128-row tiles ("off") or "auto" (the default; contig_plan.h's rule)."""
    _LIB.dk_set_contig_swap_tails(ctypes.c_int({"off": 0, "on": 1, "auto": 2}[mode]))


def set_pdl(on):
    """Benchmark knob: Programmatic Dependent Launch for the GEMMs (default on)."""
    _LIB.dk_set_pdl(ctypes.c_int(int(on)))


@contextlib.contextmanager
def launch_switches(**env):
    """The launchers' A/B switches read per launch (DK_W8A16_TOKEN_TILE, DK_SWAPAB_SPLIT_K, DK_BF16_SWAPAB, ...) set for
    the block (values as strings; a falsy value, e.g. None, leaves that switch unset); all are cleared after."""
    try:
        for key, v in env.items():
            if v:
                os.environ[key] = str(v)
        yield
    finally:
        for key in env:
            os.environ.pop(key, None)


def grouped_gemm_masked(X, W, Y, *, offsets=None, counts=None, cap=0, max_rows, max_active=0, scales=None, fuse_silu=False,
                        routing_ready=False):
    """Small-M path. W [E, N, K] bf16 or int8 (then scales [E, N] fp32). X/Y rows per ExpertRows.
    fuse_silu: W rows gate/up interleaved by 8 (interleave_gate_up), Y = silu(gate) * up [rows, N/2].
    routing_ready: routing_ready_before_wait (PDL mode 1 only; the routing was written two kernels back)."""
    E, N, K = W.shape
    i32 = lambda v: ctypes.c_int(int(v))
    if W.dtype == torch.int8:
        _call("dk_grouped_gemm_w8a16_masked", _p(X), _p(W), _p(scales), _p(Y), _p(offsets), _p(counts), i32(cap),
              i32(E), i32(N), i32(K), i32(max_rows), i32(max_active), _stream(), i32(fuse_silu), i32(routing_ready))
    else:
        _call("dk_grouped_gemm_bf16_masked", _p(X), _p(W), _p(Y), _p(offsets), _p(counts), i32(cap), i32(E), i32(N),
              i32(K), i32(max_rows), i32(max_active), _stream(), i32(fuse_silu), i32(routing_ready))


def grouped_gemm_contiguous(X, W, Y, offsets, fuse_silu=False):
    E, N, K = W.shape
    _call("dk_grouped_gemm_bf16_contiguous", _p(X), _p(W), _p(Y), _p(offsets), ctypes.c_int(X.shape[0]),
          ctypes.c_int(E), ctypes.c_int(N), ctypes.c_int(K), _stream(), ctypes.c_int(int(fuse_silu)))


def grouped_gemm_w8a16_contiguous(X, Wq, scales, Y, offsets, rows_hint, fuse_silu=False, routing_ready=False):
    """W8A16 tensor-core kernel: Wq [E, N, K] int8, scales [E, N] fp32, contiguous rows by offsets.
    rows_hint picks the token tile (16, 32, 64 or 128 rows per expert per tile). routing_ready: the offsets were
    written two or more kernels back (the first weight tiles go out before the kernel's griddepcontrol.wait)."""
    E, N, K = Wq.shape
    i32 = lambda v: ctypes.c_int(int(v))
    _call("dk_grouped_gemm_w8a16_contiguous", _p(X), _p(Wq), _p(scales), _p(Y), _p(offsets), i32(X.shape[0]), i32(E),
          i32(N), i32(K), i32(rows_hint), _stream(), i32(fuse_silu), i32(routing_ready))


def w8a16_wgmma_token_tile(rows_hint):
    return int(_LIB.dk_w8a16_wgmma_token_tile(ctypes.c_int(int(rows_hint))))


def grouped_gemm_bf16_swapab(X, W, Y, offsets, rows_hint, fuse_silu=False):
    """bf16 swap-AB tensor-core kernel (decode sizes): W [E, N, K] bf16, contiguous rows by offsets.
    rows_hint picks the token tile (8, 16, 32, 64 or 128 rows per expert per tile)."""
    E, N, K = W.shape
    i32 = lambda v: ctypes.c_int(int(v))
    _call("dk_grouped_gemm_bf16_swapab", _p(X), _p(W), _p(Y), _p(offsets), i32(X.shape[0]), i32(E), i32(N), i32(K),
          i32(rows_hint), _stream(), i32(fuse_silu))


def bf16_swapab_token_tile(rows_hint):
    return int(_LIB.dk_bf16_swapab_token_tile(ctypes.c_int(int(rows_hint))))


def swapab_split_k(token_tile, M, E, N, k_blocks, sms):
    """The swap-AB kernels' split-K cluster size (1, 2 or 4) by their launch rule (without DK_SWAPAB_SPLIT_K);
    k_blocks = K / 64 for bf16, K / 128 for int8."""
    return int(_LIB.dk_swapab_split_k(*(ctypes.c_int(int(v)) for v in (token_tile, M, E, N, k_blocks, sms))))


def interleave_gate_up(W):
    """W [E, 2I, K] (gate rows then up rows) -> new tensor with 8-row gate/up blocks alternating.
    Also takes int8 weights, and scales [E, 2I] (as [E, 2I, 1])."""
    E, two_i, K = W.shape
    out = torch.empty_like(W)
    _call("dk_interleave_gate_up", _p(W), _p(out), ctypes.c_int(E), ctypes.c_int(two_i // 2), ctypes.c_int(K),
          ctypes.c_int(W.element_size()), _stream())
    return out


def router_topk(logits, k, *, scoring="softmax", renormalize=True, bias=None, num_groups=1, topk_groups=1, scale=1.0):
    T, E = logits.shape
    ids = torch.empty(T, k, dtype=torch.int32, device=logits.device)
    w = torch.empty(T, k, dtype=torch.float32, device=logits.device)
    _call("dk_router_topk", _p(logits), _p(bias), ctypes.c_int(T), ctypes.c_int(E), ctypes.c_int(k),
          ctypes.c_int(0 if scoring == "softmax" else 1), ctypes.c_int(int(renormalize)), ctypes.c_int(num_groups),
          ctypes.c_int(topk_groups), ctypes.c_float(scale), _p(ids), _p(w), _stream())
    return ids, w


def moe_align(ids, E, cap=0, out=None):
    """ids [T, k] int32 -> (counts [E], offsets [E+1] or None, slot_row [T*k])."""
    M = ids.numel()
    dev = ids.device
    counts, offsets, slot_row = out or (torch.empty(E, dtype=torch.int32, device=dev),
                                        torch.empty(E + 1, dtype=torch.int32, device=dev) if cap == 0 else None,
                                        torch.empty(M, dtype=torch.int32, device=dev))
    _call("dk_moe_align", _p(ids), ctypes.c_int(M), ctypes.c_int(E), ctypes.c_int(cap), _p(counts), _p(offsets),
          _p(slot_row), _stream())
    return counts, offsets, slot_row


def moe_permute(X, slot_row, k, Xp):
    T, H = X.shape
    _call("dk_moe_permute", _p(X), _p(slot_row), ctypes.c_int(T), ctypes.c_int(k), ctypes.c_int(H), _p(Xp), _stream())


def moe_unpermute(Y, slot_row, weights, out):
    T, k = weights.shape
    H = Y.shape[1]
    _call("dk_moe_unpermute", _p(Y), _p(slot_row), _p(weights), ctypes.c_int(T), ctypes.c_int(k), ctypes.c_int(H),
          _p(out), _stream())


def silu_mul(h, act):
    rows, two_i = h.shape
    _call("dk_silu_mul", _p(h), ctypes.c_int(rows), ctypes.c_int(two_i // 2), _p(act), _stream())


def quantize_int8_rows(w2d):
    rows, K = w2d.shape
    q = torch.empty(rows, K, dtype=torch.int8, device=w2d.device)
    s = torch.empty(rows, dtype=torch.float32, device=w2d.device)
    _call("dk_quantize_int8_rows", _p(w2d), ctypes.c_int(rows), ctypes.c_int(K), _p(q), _p(s), _stream())
    return q, s


def quantize_int8_streaming(host_w):
    """host_w [E, N, K] bf16 on the CPU -> (q [E, N, K] int8, scales [E, N]) on the GPU."""
    E, N, K = host_w.shape
    q = torch.empty(E, N, K, dtype=torch.int8, device="cuda")
    s = torch.empty(E, N, dtype=torch.float32, device="cuda")
    torch.cuda.synchronize()
    _call("dk_quantize_int8_streaming", ctypes.c_void_p(host_w.data_ptr()), ctypes.c_int(E), ctypes.c_int(N),
          ctypes.c_int(K), _p(q), _p(s), _stream())
    return q, s


def moe_grouped_gemm(X, W, Y, offsets, T, fuse_silu=False, routing_ready=False):
    """The layer's entry: small-M or wgmma path chosen from T."""
    E, N, K = W.shape
    _call("dk_moe_grouped_gemm_bf16", _p(X), _p(W), _p(Y), _p(offsets), ctypes.c_int(X.shape[0]), ctypes.c_int(T),
          ctypes.c_int(E), ctypes.c_int(N), ctypes.c_int(K), _stream(), ctypes.c_int(int(fuse_silu)),
          ctypes.c_int(int(routing_ready)))


def pdl_delayed_copy(pairs, delay_ns=0):
    """Test fixture: one kernel launched with PDL that triggers its dependents at once, waits for its own
    predecessor, spins delay_ns, then copies each (src, dst) tensor pair (at most 3; 16-byte aligned)."""
    args = []
    for i in range(3):
        if i < len(pairs):
            src, dst = pairs[i]
            assert src.nbytes == dst.nbytes and src.is_contiguous() and dst.is_contiguous()
            args += [_p(src), _p(dst), ctypes.c_size_t(src.nbytes)]
        else:
            args += [ctypes.c_void_p(0), ctypes.c_void_p(0), ctypes.c_size_t(0)]
    _call("dk_pdl_delayed_copy", *args, ctypes.c_longlong(int(delay_ns)), _stream())
