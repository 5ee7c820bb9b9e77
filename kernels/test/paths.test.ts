// The launch rules measured on the H200 (docs/kernels.md: the bf16 entry's path in session 8, the W8A16 token tile
// and CTAs per SM in session 7), through the addon's pure host functions: no GPU needed, so CI pins them.
import { beforeAll, describe, expect, test } from "bun:test";
import { loadKernels, type Kernels } from "../index";
import { ensureAddon } from "./helpers";

let k: Kernels;
beforeAll(() => {
  ensureAddon();
  k = loadKernels();
}, 300_000);

const H200 = 132;
// (hidden H, expert intermediate I, experts E, top-k) as in bench/kernels
const QWEN3 = { H: 2048, I: 768, E: 128, k: 8 };
const MIXTRAL = { H: 4096, I: 14336, E: 8, k: 2 };
type Shape = typeof QWEN3;
const gateUp = (s: Shape, T: number) => ({ T, M: T * s.k, E: s.E, N: 2 * s.I, K: s.H, sms: H200 });
const down = (s: Shape, T: number) => ({ T, M: T * s.k, E: s.E, N: s.H, K: s.I, sms: H200 });

describe("moeBf16Path", () => {
  test("one or two tokens: swap-AB only with about one work item per SM", () => {
    // Qwen3-30B-A3B at one token: gate_up has 12 output tiles x 8 experts = 96 items, down 16 x 8 = 128
    expect(k.paths.moeBf16Path(gateUp(QWEN3, 1))).toEqual({ path: "small_m", tokenTile: 0 });
    expect(k.paths.moeBf16Path(down(QWEN3, 1))).toEqual({ path: "swapab", tokenTile: 8 });
    expect(k.paths.moeBf16Path(gateUp(QWEN3, 2)).path).toBe("swapab"); // 12 x 16 = 192 items
    // Mixtral down: 32 x 2 = 64 items, each split over a pair of SMs (session 9)
    expect(k.paths.moeBf16Path(down(MIXTRAL, 1))).toEqual({ path: "swapab", tokenTile: 8 });
    expect(k.paths.moeBf16Path({ ...down(MIXTRAL, 1), K: 448 }).path).toBe("small_m"); // 7 k blocks: no split
    // the same launch on a GPU with more SMs keeps the small-M kernel
    expect(k.paths.moeBf16Path({ ...down(QWEN3, 1), sms: 200 }).path).toBe("small_m");
  });

  test("3-256 tokens: swap-AB with the token tile from twice the mean rows per expert plus 8", () => {
    expect(k.paths.moeBf16Path(gateUp(QWEN3, 4))).toEqual({ path: "swapab", tokenTile: 8 }); // hint min(4, 10)
    expect(k.paths.moeBf16Path(gateUp(QWEN3, 16))).toEqual({ path: "swapab", tokenTile: 16 }); // hint 10
    expect(k.paths.moeBf16Path(gateUp(QWEN3, 64))).toEqual({ path: "swapab", tokenTile: 16 }); // hint 16
    expect(k.paths.moeBf16Path(gateUp(QWEN3, 128))).toEqual({ path: "swapab", tokenTile: 32 }); // hint 24
    expect(k.paths.moeBf16Path(gateUp(QWEN3, 256))).toEqual({ path: "swapab", tokenTile: 64 }); // hint 40
    expect(k.paths.moeBf16Path(gateUp(QWEN3, 257)).path).toBe("contiguous");
    expect(k.paths.moeBf16Path(gateUp(MIXTRAL, 128))).toEqual({ path: "swapab", tokenTile: 64 }); // hint 72
    expect(k.paths.moeBf16Path(gateUp(MIXTRAL, 256)).path).toBe("contiguous"); // hint 136 > 96
  });

  test("shapes or pointers the swap-AB kernel refuses, and DK_BF16_SWAPAB=0, keep the earlier paths", () => {
    const tiny = { T: 8, M: 16, E: 4, N: 96, K: 64, sms: H200 }; // N % 128 != 0
    expect(k.paths.moeBf16Path(tiny).path).toBe("small_m");
    expect(k.paths.moeBf16Path({ ...tiny, T: 64, M: 128 }).path).toBe("contiguous");
    expect(k.paths.moeBf16Path({ ...gateUp(QWEN3, 8), K: 2080 }).path).toBe("small_m"); // K % 64 != 0
    expect(k.paths.moeBf16Path({ ...gateUp(QWEN3, 8), aligned: false }).path).toBe("small_m");
    expect(k.paths.moeBf16Path({ ...gateUp(QWEN3, 8), swapab: false }).path).toBe("small_m");
    expect(k.paths.moeBf16Path({ ...gateUp(QWEN3, 64), swapab: false }).path).toBe("contiguous");
  });

  test("bad options are refused with the kernels' error code", () => {
    expect(() => k.paths.moeBf16Path({ ...gateUp(QWEN3, 8), sms: 0 })).toThrow(/must be positive/);
    expect(() => k.paths.moeBf16Path({ T: 8 } as never)).toThrow(/missing option M/);
    let code: string | undefined;
    try {
      k.paths.moeBf16Path({ ...gateUp(QWEN3, 8), M: 1 }); // M < T
    } catch (e) {
      code = (e as { code?: string }).code;
    }
    expect(code).toBe("DK_KERNEL");
  });
});

describe("w8a16Launch", () => {
  test("token tile by rows-per-expert hint, at every boundary", () => {
    const rule: Record<number, number> = { 1: 8, 8: 8, 9: 16, 16: 16, 17: 32, 32: 32, 33: 64, 96: 64, 97: 128, 256: 128,
      257: 192, 100000: 192 };
    for (const [hint, tile] of Object.entries(rule)) {
      const launch = k.paths.w8a16Launch({ rowsHint: Number(hint), M: 4096, E: 128, N: 1536, sms: H200 });
      expect(launch.tokenTile).toBe(tile);
    }
  });

  test("one CTA per SM at about one work item per SM or tiles above 64 tokens, two otherwise", () => {
    // Qwen3-30B-A3B gate_up at one token, hint 10: 12 output tiles x 8 experts = 96 items
    const oneToken = k.paths.w8a16Launch({ rowsHint: 10, M: 8, E: 128, N: 1536, sms: H200 });
    expect(oneToken).toEqual({ tokenTile: 16, ctasPerSm: 1 });
    // Mixtral down at two tokens: 32 x 4 = 128 items < 132 SMs: one CTA (session 9: 68.8 vs 108.6 us with two);
    // deepseek-moe-16b gate_up at one token: 22 x 6 = 132 items: two
    expect(k.paths.w8a16Launch({ rowsHint: 10, M: 4, E: 8, N: 4096, sms: H200 }).ctasPerSm).toBe(1);
    expect(k.paths.w8a16Launch({ rowsHint: 10, M: 6, E: 64, N: 2816, sms: H200 }).ctasPerSm).toBe(2);
    // at 16 tokens: 12 x (8 + 128) items
    expect(k.paths.w8a16Launch({ rowsHint: 10, M: 128, E: 128, N: 1536, sms: H200 }).ctasPerSm).toBe(2);
    // 128- and 192-token tiles always run one CTA (two would hold two stages each)
    const wide = (rowsHint: number, M: number) => k.paths.w8a16Launch({ rowsHint, M, E: 128, N: 1536, sms: H200 });
    expect(wide(200, 32768)).toEqual({ tokenTile: 128, ctasPerSm: 1 });
    expect(wide(300, 131072)).toEqual({ tokenTile: 192, ctasPerSm: 1 });
  });
});

describe("swapabSplit", () => {
  const split = (s: Shape, proj: "gate_up" | "down", T: number, tokenTile: number, int8 = false) => {
    const o = proj === "gate_up" ? gateUp(s, T) : down(s, T);
    return k.paths.swapabSplit({ tokenTile, M: o.M, E: o.E, N: o.N, K: o.K, sms: o.sms, int8 });
  };

  test("pairs of SMs split K where each pair gets at most one item", () => {
    // Mixtral down at one token: 32 output tiles x 2 experts = 64 items on 128 SMs (bf16 and int8)
    expect(split(MIXTRAL, "down", 1, 8)).toEqual({ items: 64, split: 2 });
    expect(split(MIXTRAL, "down", 1, 16, true)).toEqual({ items: 64, split: 2 });
    expect(k.paths.swapabSplit({ tokenTile: 8, M: 2, E: 8, N: 4096, K: 14336, sms: 128 }).split).toBe(2); // 128 SMs
    expect(k.paths.swapabSplit({ tokenTile: 8, M: 2, E: 8, N: 4096, K: 14336, sms: 127 }).split).toBe(1);
  });

  test("no split where clusters would take several items in turn (measured slower), or without 4 k blocks a rank", () => {
    // Qwen3-30B-A3B gate_up at one token: 12 x 8 = 96 items; at two, 192; down at one, 16 x 8 = 128
    expect(split(QWEN3, "gate_up", 1, 8)).toEqual({ items: 96, split: 1 });
    expect(split(QWEN3, "gate_up", 2, 8)).toEqual({ items: 192, split: 1 });
    expect(split(QWEN3, "down", 1, 8)).toEqual({ items: 128, split: 1 });
    // 7 k blocks of 64
    expect(k.paths.swapabSplit({ tokenTile: 8, M: 2, E: 8, N: 4096, K: 448, sms: H200 }).split).toBe(1);
    // wide token tiles never split
    expect(split(MIXTRAL, "down", 1, 32).split).toBe(1);
  });

  test("the item bound counts one partial token tile per expert that can have rows", () => {
    // 8 tokens x top-8 = 64 rows over at most 64 experts (128 exist): 12 x 64 items with tiles of 8
    expect(split(QWEN3, "gate_up", 8, 8).items).toBe(12 * 64);
    // Mixtral at 64 tokens: 128 rows over 8 experts: 8 partial tiles + 120 / 16 whole ones
    expect(split(MIXTRAL, "gate_up", 64, 16).items).toBe(224 * (8 + 7));
  });
});
