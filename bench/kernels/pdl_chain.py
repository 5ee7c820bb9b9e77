"""The MoE layer's expert chain with and without PDL on the legacy small-M kernel (run on the H200).

Chain (kernels/python/moe_chain.py, as native-cuda's moe_layer launches it): producer (dk.pdl_delayed_copy,
launched with PDL, copies the routing and X, no delay) -> gate|up (fused SiLU) -> down, contiguous rows,
uniform routing. Columns (microseconds per chain, median replay of a CUDA graph of R chains with the
weights rotated over enough copies that L2 does not keep them, as bench.py):
  producer: the producer alone; off: g_small_m_pdl_mode 0 (the library default); on: mode 1 (PDL, down
  reads the routing and loads its first weights before its wait); waitfirst: mode 2 (PDL, both GEMMs wait
  first); gain = off - on. The tile hint is the model's (bf16: T at T <= 16; int8: min(T, 2 ceil(M/E) + 8)).
  bf16 at T = 64 runs the small-M kernel here; the model's bf16 path takes the wgmma kernel there (marked *).
  int8 on Mixtral / DeepSeek-V3 at <= 8 rows per expert runs the pair schedule, which keeps its launch.

Usage: python3 bench/kernels/pdl_chain.py [--out pdl_chain.json] [--tokens 1,8,64] [--models ...] [--budget-s 30]
"""
import argparse
import json
import math
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "kernels", "python"))
sys.path.insert(0, os.path.dirname(__file__))
import bench  # noqa: E402  (GraphSet, hbm_read_ceiling)
import dk  # noqa: E402
from moe_chain import ExpertChain  # noqa: E402
from moe_shapes import SHAPES, group_rows, route  # noqa: E402

L2_BYTES = 50 * 2**20
MODES = (("off", 0), ("on", 1), ("waitfirst", 2))


def copies_for(E, H, I, k, elem_bytes):
    """Weight copies so a run of chains does not find the last chain's weights in L2 (at most 40 GB)."""
    per_copy = E * 3 * I * H * elem_bytes
    touched = min(E, k) * 3 * I * H * elem_bytes  # the experts one token reads
    return max(1, min(8, math.ceil(3 * L2_BYTES / touched), int(40e9 // per_copy)))


def time_rows(model, dtype, W1s, W2s, S1, S2, tokens, gen, doc, ceiling):
    H, I, E, k = SHAPES[model]
    for T in tokens:
        chain = ExpertChain(E, T, k, H, I, "contiguous")
        _, counts, offsets = group_rows(route(T, E, k, "uniform", gen), E)
        chain.stage(counts, offsets, torch.randn(T * k, H, dtype=torch.bfloat16, device="cuda", generator=gen))
        active = int((counts > 0).sum().item())
        w_bytes = active * 3 * I * H * (1 if dtype == "int8" else 2)
        est = w_bytes / 3.5e12 + 15e-6
        launches = [lambda W1=W1, W2=W2: chain.launch(W1, W2, S1, S2) for W1, W2 in zip(W1s, W2s)]
        row = {"model": model, "dtype": dtype, "tokens": T, "active_experts": active, "weight_bytes": w_bytes,
               "copies": len(W1s), "us": {}}
        producer = [lambda: dk.pdl_delayed_copy([(chain.x_stage, chain.x_live), (chain.route_stage, chain.route_live)])]
        graphs = bench.GraphSet()  # each mode captured under its switch, then all timed in interleaved rounds
        for name, mode, fns, e in (("producer", 0, producer, 5e-6),) + tuple((n, m, launches, est) for n, m in MODES):
            dk.set_small_m_pdl_mode(mode)
            try:
                graphs.add(name, fns, e)
            except Exception as ex:  # recorded, not fatal
                row.setdefault("errors", {})[name] = repr(ex)[:300]
            finally:
                dk.set_small_m_pdl_mode(0)
        row["us"] = graphs.time()
        u = row["us"]
        row["hbm_share_on"] = w_bytes / (u["on"] * 1e-6) / ceiling if "on" in u else None
        doc["rows"].append(row)
        star = "*" if dtype == "bf16" and T > 16 else " "
        print(f"{model:17s} {dtype:4s} T={T:2d}{star} producer {u.get('producer', float('nan')):6.1f}  "
              + "  ".join(f"{n} {u[n]:7.1f}" for n, _ in MODES if n in u)
              + (f"  gain {u['off'] - u['on']:+6.1f} us ({u['on'] / u['off']:.3f}x)" if "on" in u and "off" in u else "")
              + f"  weights {w_bytes / 1e6:.0f} MB" + (f"  errors {row['errors']}" if "errors" in row else ""), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--lib")
    ap.add_argument("--models", default=",".join(SHAPES))
    ap.add_argument("--tokens", default="1,8,64")
    ap.add_argument("--budget-s", type=float, default=30)
    args = ap.parse_args()
    t0 = time.time()
    dk.load(args.lib)
    bench.TIME_S = 0.03
    gen = torch.Generator(device="cuda")
    gen.manual_seed(11)
    ceiling = bench.hbm_read_ceiling()
    doc = {"device": torch.cuda.get_device_name(), "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
           "hbm_read_ceiling_Bps": ceiling, "rows": []}
    print(f"pdl chain (producer -> gate|up fused SiLU -> down), us per chain; ceiling {ceiling / 1e12:.2f} TB/s", flush=True)
    tokens = [int(t) for t in args.tokens.split(",")]
    for model in args.models.split(","):
        if time.time() - t0 > args.budget_s:
            doc["truncated"] = True
            print(f"budget of {args.budget_s} s spent: stopped before {model}")
            break
        H, I, E, k = SHAPES[model]
        torch.cuda.empty_cache()
        W1 = torch.randn(E, 2 * I, H, dtype=torch.bfloat16, device="cuda", generator=gen)  # read as interleaved
        W2 = torch.randn(E, H, I, dtype=torch.bfloat16, device="cuda", generator=gen)
        n = copies_for(E, H, I, k, 2)
        W1s, W2s = [W1] + [W1.clone() for _ in range(n - 1)], [W2] + [W2.clone() for _ in range(n - 1)]
        time_rows(model, "bf16", W1s, W2s, None, None, tokens, gen, doc, ceiling)
        q1, s1 = dk.quantize_int8_rows(W1.view(-1, H))
        q2, s2 = dk.quantize_int8_rows(W2.view(-1, I))
        del W1, W2, W1s, W2s
        torch.cuda.empty_cache()
        n = copies_for(E, H, I, k, 1)
        Q1, Q2 = q1.view(E, 2 * I, H), q2.view(E, H, I)
        Q1s, Q2s = [Q1] + [Q1.clone() for _ in range(n - 1)], [Q2] + [Q2.clone() for _ in range(n - 1)]
        time_rows(model, "int8", Q1s, Q2s, s1.view(E, 2 * I), s2.view(E, H), tokens, gen, doc, ceiling)
        del q1, q2, Q1, Q2, Q1s, Q2s
        if args.out:
            json.dump(doc, open(args.out, "w"), indent=1)
    rows = [r for r in doc["rows"] if all(n in r["us"] for n, _ in MODES)]
    if rows:
        faster = lambda a, b: sum(r["us"][a] < r["us"][b] for r in rows)  # noqa: E731
        gains = sorted(r["us"]["off"] - r["us"]["on"] for r in rows)
        print(f"rows with all three: {len(rows)}; on faster than off {faster('on', 'off')}, waitfirst faster than "
              f"off {faster('waitfirst', 'off')}, on faster than waitfirst {faster('on', 'waitfirst')}; "
              f"gain off - on: median {gains[len(gains) // 2]:+.1f} us, range {gains[0]:+.1f}..{gains[-1]:+.1f} us")
    doc["elapsed_s"] = time.time() - t0
    if args.out:
        json.dump(doc, open(args.out, "w"), indent=1)


if __name__ == "__main__":
    main()
