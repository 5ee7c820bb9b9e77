"""The decode MoE layer's expert chain for the PDL test and benchmark, launched as native-cuda's moe_layer
launches it: routing producer -> gate|up (fused SiLU; routing written by the kernel right before it, so
routing_ready=False) -> down (routing from two kernels back: routing_ready=True; the swap-AB kernels then load
their first weight tiles before their griddepcontrol.wait). bf16 contiguous takes the bf16 entry, int8
contiguous the W8A16 tensor-core kernel (as native-cuda), the rest the small-M kernel. The producer is
dk.pdl_delayed_copy (PDL, triggers its dependents at once, then copies the staged routing and X into the
live buffers after delay_ns), standing in for native-cuda's route_small.

Legend: T tokens, E experts, k top-k, M = T*k routed rows, H hidden, I expert intermediate.
Rows: contiguous (offsets [E+1], X [M, H]) or masked (counts [E], X [E*T, H], cap = T).
"""
import math

import torch

import dk


def small_m_hint(T, M, E, dtype):
    """Rows per expert the small-M tile covers per pass, as the model passes it: bf16 T (through
    moe_grouped_gemm_bf16, T <= 16), int8 native-cuda's small_m_rows_hint rule."""
    return T if dtype == "bf16" and T <= 16 else min(T, 2 * math.ceil(M / E) + 8)


class ExpertChain:
    """Live and staged buffers of one (E, T, k, H, I, layout); weights are passed per launch."""

    def __init__(self, E, T, k, H, I, layout):
        assert layout in ("contiguous", "masked")
        self.E, self.T, self.k, self.H, self.I, self.layout = E, T, k, H, I, layout
        self.M = T * k
        self.rows = self.M if layout == "contiguous" else E * T
        dev = "cuda"
        n_route = E + 1 if layout == "contiguous" else E
        self.route_live = torch.zeros(n_route, dtype=torch.int32, device=dev)
        self.route_stage = torch.zeros(n_route, dtype=torch.int32, device=dev)
        self.x_live = torch.zeros(self.rows, H, dtype=torch.bfloat16, device=dev)
        self.x_stage = torch.zeros(self.rows, H, dtype=torch.bfloat16, device=dev)
        self.act = torch.empty(self.rows, I, dtype=torch.bfloat16, device=dev)
        self.y = torch.empty(self.rows, H, dtype=torch.bfloat16, device=dev)

    def stage(self, counts, offsets, Xc):
        """Next routing (counts [E], offsets [E+1]) and rows grouped by expert Xc [M, H] into the staging
        buffers. Returns dst [M]: the live row of each grouped row."""
        if self.layout == "contiguous":
            self.route_stage.copy_(offsets)
            self.x_stage.copy_(Xc)
            return torch.arange(self.M, device="cuda")
        c = counts.long()
        dst = (torch.arange(self.E, device="cuda").repeat_interleave(c) * self.T
               + torch.arange(self.M, device="cuda") - offsets[:-1].long().repeat_interleave(c))
        self.route_stage.copy_(counts)
        self.x_stage.zero_()
        self.x_stage[dst] = Xc
        return dst

    def poison(self):
        self.act.fill_(float("nan"))
        self.y.fill_(float("nan"))

    def launch(self, W1i, W2, S1i=None, S2=None, delay_ns=0, producer=True):
        """producer (optional) -> gate|up (W1i: gate/up rows interleaved by 8) -> down, on the current stream."""
        if producer:
            dk.pdl_delayed_copy([(self.x_stage, self.x_live), (self.route_stage, self.route_live)], delay_ns)
        dtype = "int8" if W1i.dtype == torch.int8 else "bf16"
        hint = small_m_hint(self.T, self.M, self.E, dtype)
        active = min(self.E, self.M)
        if self.layout == "contiguous" and dtype == "bf16":  # the model's bf16 entry
            dk.moe_grouped_gemm(self.x_live, W1i, self.act, self.route_live, self.T, fuse_silu=True)
            dk.moe_grouped_gemm(self.act, W2, self.y, self.route_live, self.T, routing_ready=True)
            return
        if self.layout == "contiguous" and dtype == "int8":  # native-cuda's int8 path (every T since session 10)
            dk.grouped_gemm_w8a16_contiguous(self.x_live, W1i, S1i, self.act, self.route_live, hint, fuse_silu=True)
            dk.grouped_gemm_w8a16_contiguous(self.act, W2, S2, self.y, self.route_live, hint, routing_ready=True)
            return
        rows = ({"offsets": self.route_live} if self.layout == "contiguous"
                else {"counts": self.route_live, "cap": self.T})
        dk.grouped_gemm_masked(self.x_live, W1i, self.act, **rows, max_rows=hint, max_active=active, scales=S1i,
                               fuse_silu=True)
        dk.grouped_gemm_masked(self.act, W2, self.y, **rows, max_rows=hint, max_active=active, scales=S2,
                               routing_ready=True)
