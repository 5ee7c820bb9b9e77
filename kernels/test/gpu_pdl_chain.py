"""GPU check of the legacy small-M kernel's PDL mode (g_small_m_pdl_mode) in the MoE layer's chain,
captured in CUDA graphs (run on the H200 from gpu_test.py --decode, and in its mutation run).

Chain (kernels/python/moe_chain.py): a producer launched with PDL that triggers its dependents at once and
writes the routing and X only after a 20 us spin -> gate|up (fused SiLU) -> down (routing_ready). Every
replay gets a new routing and new X, and act and Y are NaN-poisoned before it, so a GEMM that read the
routing or its input before the data was there shows as a mismatch or a NaN. Modes: off (0), on (1: down
reads the routing and loads weights before its wait), waitfirst (2: PDL, both GEMMs wait first).
act is checked against fp32 torch, Y against fp32 torch on the act the kernel wrote (each GEMM to the
single-GEMM tolerance); on and waitfirst must give off's bits.
"""
import torch

import dk
from moe_chain import ExpertChain
from moe_shapes import SHAPES, group_rows, ref_grouped, rel_err, route

MODES = {"off": 0, "on": 1, "waitfirst": 2}
DELAY_NS = 20_000
CASES = (("qwen3-30b-a3b", (1, 8, 64)), ("mixtral-8x7b", (1, 8)))  # mixtral int8 at <= 8 rows: pair (no PDL)


def _weights(model, gen):
    H, I, E, k = SHAPES[model]
    W1 = torch.randn(E, 2 * I, H, dtype=torch.bfloat16, device="cuda", generator=gen) * H ** -0.5
    W2 = torch.randn(E, H, I, dtype=torch.bfloat16, device="cuda", generator=gen) * I ** -0.5
    q1, s1 = dk.quantize_int8_rows(W1.view(E * 2 * I, H))
    q2, s2 = dk.quantize_int8_rows(W2.view(E * H, I))
    W1q, S1 = q1.view(E, 2 * I, H), s1.view(E, 2 * I)
    bf16 = {"W1": W1, "W2": W2, "S1": None, "S2": None, "W1i": dk.interleave_gate_up(W1), "S1i": None}
    int8 = {"W1": W1q, "W2": q2.view(E, H, I), "S1": S1, "S2": s2.view(E, H), "W1i": dk.interleave_gate_up(W1q),
            "S1i": dk.interleave_gate_up(S1.view(E, 2 * I, 1)).view(E, 2 * I)}
    return {"bf16": bf16, "w8a16": int8}


def _capture(chain, w, mode):
    dk.set_small_m_pdl_mode(mode)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())  # the inputs were written on the default stream
    try:
        with torch.cuda.stream(s):
            chain.launch(w["W1i"], w["W2"], w["S1i"], w["S2"], DELAY_NS)  # warm-up (one-time host setup)
            s.synchronize()
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, stream=s):
                chain.launch(w["W1i"], w["W2"], w["S1i"], w["S2"], DELAY_NS)
    finally:
        dk.set_small_m_pdl_mode(0)
    return g


def test_pdl_chain(gen, check, expect_fail=False):
    ok = True
    for model, tokens in CASES:
        H, I, E, k = SHAPES[model]
        weights = _weights(model, gen)
        for T in tokens:
            for dt, w in weights.items():
                for layout in ("contiguous", "masked"):
                    chain = ExpertChain(E, T, k, H, I, layout)
                    graphs = {name: _capture(chain, w, mode) for name, mode in MODES.items()}
                    for trial in range(3):
                        _, counts, offsets = group_rows(route(T, E, k, "zipf" if trial == 1 else "uniform", gen), E)
                        Xc = torch.randn(T * k, H, dtype=torch.bfloat16, device="cuda", generator=gen)
                        dst = chain.stage(counts, offsets, Xc)
                        h = ref_grouped(Xc, w["W1"], offsets, w["S1"])
                        act_ref = torch.nn.functional.silu(h[:, :I]) * h[:, I:]
                        used = torch.zeros(chain.rows, dtype=torch.bool, device="cuda")
                        used[dst] = True
                        got = {}
                        for name, g in graphs.items():
                            chain.poison()
                            g.replay()
                            torch.cuda.synchronize()
                            label = f"{model}/T{T}/trial{trial}"
                            fam = f"{dt}_{layout}_{name}"
                            act, y = chain.act[dst], chain.y[dst]
                            ok &= check(f"pdl_chain_act_{fam}/{label}", rel_err(act, act_ref))
                            ok &= check(f"pdl_chain_{fam}/{label}", rel_err(y, ref_grouped(act, w["W2"], offsets, w["S2"])))
                            if layout == "masked":
                                clean = bool(chain.y[~used].isnan().all().item()) and bool(chain.act[~used].isnan().all().item())
                                ok &= check(f"pdl_chain_untouched_{fam}/{label}", 0.0 if clean else 1.0)
                            got[name] = (chain.act.clone(), chain.y.clone())
                        if not expect_fail:  # PDL changes the launch, never the arithmetic
                            for name in ("on", "waitfirst"):
                                same = all(torch.equal(a.view(torch.int16), b.view(torch.int16))
                                           for a, b in zip(got[name], got["off"]))
                                ok &= check(f"pdl_chain_same_bits_{dt}_{layout}_{name}/{model}/T{T}/trial{trial}",
                                            0.0 if same else 1.0)
                    del graphs
    return ok
