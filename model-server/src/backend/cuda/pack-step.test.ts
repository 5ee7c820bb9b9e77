import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { readModelConfig } from "../../model/cpu-runner";
import { toNativeConfig } from "./native-config";
import { packDeviceSampling, packSampling, SAMPLE_PARAMS_PER_ROW, packStep, splitLogits, splitSampled } from "./pack-step";
import type { GpuSampling } from "../../model/cuda-runner";

const lim = { blockSize: 4, numBlocks: 16, stride: 4, vocabSize: 100, maxContext: 16 };

describe("packStep", () => {
  test("a prefill chunk and a decode token pack into ids|pos|slot|tokSeq|rows|tables", () => {
    const p = packStep(
      {
        seqs: [
          { tokens: Int32Array.of(5, 6, 7), startPos: 2, blockTable: Int32Array.of(9, 3), numLogits: 1 },
          { tokens: Int32Array.of(), startPos: 0, blockTable: Int32Array.of(), numLogits: 0 },
          { tokens: Int32Array.of(42), startPos: 4, blockTable: Int32Array.of(1, 7), numLogits: 1 },
        ],
      },
      lim,
    );
    expect([p.T, p.S, p.R]).toEqual([4, 2, 2]);
    const m = Array.from(p.meta);
    expect(m.slice(0, 4)).toEqual([5, 6, 7, 42]); // ids
    expect(m.slice(4, 8)).toEqual([2, 3, 4, 4]); // positions
    expect(m.slice(8, 12)).toEqual([9 * 4 + 2, 9 * 4 + 3, 3 * 4 + 0, 7 * 4 + 0]); // slots
    expect(m.slice(12, 16)).toEqual([0, 0, 0, 1]); // table row of each token
    expect(m.slice(16, 18)).toEqual([2, 3]); // logit rows
    expect(m.slice(18)).toEqual([9, 3, 0, 0, 1, 7, 0, 0]); // tables, stride 4
    expect(p.logitCounts).toEqual([1, 0, 1]);
  });

  test("splitLogits gives each sequence its rows (empty for none)", () => {
    const logits = Float32Array.from({ length: 3 * 2 }, (_, i) => i);
    const parts = splitLogits(logits, [2, 0, 1], 2);
    expect(parts.map((x) => Array.from(x))).toEqual([[0, 1, 2, 3], [], [4, 5]]);
  });

  test("bad input is refused before it reaches the GPU", () => {
    const seq = (o: object) => ({ seqs: [{ tokens: Int32Array.of(1), startPos: 0, blockTable: Int32Array.of(0), numLogits: 1, ...o }] });
    expect(() => packStep(seq({ tokens: Int32Array.of(100) }), lim)).toThrow("outside the vocabulary");
    expect(() => packStep(seq({ blockTable: Int32Array.of(16) }), lim)).toThrow("outside the cache");
    expect(() => packStep(seq({ startPos: 4 }), lim)).toThrow("cannot hold");
    expect(() => packStep(seq({ numLogits: 2 }), lim)).toThrow("numLogits");
    expect(() => packStep(seq({ startPos: 16, blockTable: Int32Array.of(0, 1, 2, 3, 4) }), lim)).toThrow("past the model's context");
  });
});

describe("toNativeConfig", () => {
  const fixture = (a: string) => readModelConfig(join(import.meta.dir, "..", "..", "..", "fixtures", "golden", a));
  test("per-architecture switches map onto the addon's flags", () => {
    const q3 = toNativeConfig(fixture("qwen3_moe"));
    expect(q3.qkNorm).toBe(1);
    expect(q3.invFreq.length).toBe(q3.headDim / 2);
    expect(q3.layers.every((l) => l.moe && l.sharedIntermediate === 0)).toBe(true);
    const ol = toNativeConfig(fixture("olmoe"));
    expect(ol.qkNorm).toBe(2);
    expect(ol.clipQkv).toBe(fixture("olmoe").clipQkv ?? 0);
    const q2 = toNativeConfig(fixture("qwen2_moe"));
    expect(q2.layers.some((l) => l.sharedGate && l.sharedIntermediate > 0)).toBe(true);
    const ds = toNativeConfig(fixture("deepseek_moe"));
    expect(ds.layers[0]!.moe).toBe(false);
    expect(ds.layers[0]!.denseIntermediate).toBeGreaterThan(0);
    expect(ds.layers[1]!.sharedGate).toBe(false);
    expect(ds.layers[1]!.sharedIntermediate).toBeGreaterThan(0);
  });
});

describe("zipfBias", () => {
  test("a permutation of -s * ln(1 + rank), seeded", async () => {
    const { zipfBias } = await import("./random-weights");
    const b = zipfBias(8, 1.2, 3);
    expect(Array.from(b).sort((x, y) => y - x)).toEqual(Array.from({ length: 8 }, (_, r) => Math.fround(-1.2 * Math.log(1 + r))));
    expect(zipfBias(8, 1.2, 3)).toEqual(b);
    expect(zipfBias(8, 1.2, 4)).not.toEqual(b);
  });
});

describe("packSampling", () => {
  const s = (o: Partial<GpuSampling> = {}): GpuSampling => ({ temperature: 0.7, topK: 40, topP: 0.9, seed: 12345, step: 3, ...o });
  test("one 20-double row per logit row; a verify step's rows draw consecutive steps", () => {
    const { params: p, penalties } = packSampling([s({ banned: [2, 5] }), s({ temperature: 0, step: 0 }), s()], [2, 1, 0], 3, 100);
    expect(penalties.length).toBe(0);
    expect(Array.from(p.subarray(14, 20))).toEqual([0, 0, 0, 0, -1, 0]); // no penalties, no top log-probabilities
    expect(p.length).toBe(3 * SAMPLE_PARAMS_PER_ROW);
    expect(Array.from(p.subarray(0, 8))).toEqual([0.7, 40, 0.9, 12345, 3, 2, 2, 5]);
    expect(p[SAMPLE_PARAMS_PER_ROW + 4]).toBe(4);
    expect(Array.from(p.subarray(2 * SAMPLE_PARAMS_PER_ROW, 2 * SAMPLE_PARAMS_PER_ROW + 6))).toEqual([0, 40, 0.9, 12345, 0, 0]);
  });
  test("what the kernel would misread is refused with the reason", () => {
    expect(() => packSampling([s({ topK: 1.5 })], [1], 1, 100)).toThrow("top_k 1.5");
    expect(() => packSampling([s({ topP: 0 })], [1], 1, 100)).toThrow("top_p 0");
    expect(() => packSampling([s({ seed: 2 ** 53 })], [1], 1, 100)).toThrow("seed");
    expect(() => packSampling([s({ temperature: Number.NaN })], [1], 1, 100)).toThrow("temperature NaN");
    expect(() => packSampling([s({ banned: [100] })], [1], 1, 100)).toThrow("banned id 100");
    expect(() => packSampling([s({ banned: [1, 2, 3, 4, 5, 6, 7, 8, 9] })], [1], 1, 100)).toThrow("at most 8 banned");
    expect(() => packSampling([s(), s()], [1], 1, 100)).toThrow("2 sampling entries for 1 sequences");
    expect(() => packSampling([s({ topLogprobs: 21 })], [1], 1, 100)).toThrow("top_logprobs 21");
    expect(() => packSampling([s({ frequencyPenalty: Number.POSITIVE_INFINITY })], [1], 1, 100)).toThrow("frequency penalty Infinity");
    expect(() => packSampling([s({ presencePenalty: 1, penalties: Int32Array.of(100, 1) })], [1], 1, 100)).toThrow("penalty pair (100, 1)");
    expect(() => packSampling([s({ presencePenalty: 1, penalties: Int32Array.of(3, 0) })], [1], 1, 100)).toThrow("penalty pair (3, 0)");
    expect(() => packSampling([s({ presencePenalty: 1, penalizeInput: true })], [1], 1, 100)).toThrow("token counts were not given");
    expect(() => packSampling([s({ presencePenalty: 1, penalizeInput: true })], [1], 1, 100, [2])).toThrow("must bring one token");
  });
  test("penalty pairs are concatenated and indexed per row; a penalized input token is placed by the step's tokens", () => {
    const { params, penalties } = packSampling(
      [
        s({ frequencyPenalty: 0.5, presencePenalty: 0.25, penalties: Int32Array.of(7, 2, 9, 1) }),
        s({ topLogprobs: 5 }),
        s({ presencePenalty: -1, penalties: Int32Array.of(3, 4), penalizeInput: true }),
        s({ penalties: Int32Array.of(8, 8) }), // no penalty coefficient: its pairs are not sent
      ],
      [1, 1, 1, 1],
      4,
      100,
      [5, 2, 1, 1],
    );
    expect(Array.from(penalties)).toEqual([7, 2, 9, 1, 3, 4]);
    const tail = (r: number) => Array.from(params.subarray(r * SAMPLE_PARAMS_PER_ROW + 14, (r + 1) * SAMPLE_PARAMS_PER_ROW));
    expect(tail(0)).toEqual([0.5, 0.25, 0, 2, -1, 0]);
    expect(tail(1)).toEqual([0, 0, 2, 0, -1, 5]);
    expect(tail(2)).toEqual([0, -1, 2, 1, 7, 0]); // token 7 of the step: 5 + 2 tokens before it
    expect(tail(3)).toEqual([0, 0, 3, 0, -1, 0]);
  });
});

describe("packDeviceSampling / splitSampled", () => {
  const greedy: GpuSampling = { temperature: 0, topK: 0, topP: 1, seed: 0, step: 0 };
  test("host-sampled sequences list their logits rows and get them back, the others their ids", () => {
    const sampling: GpuSampling[] = [{ ...greedy, temperature: 0.7, seed: 5 }, { ...greedy, host: true, temperature: Number.NaN }, greedy, { ...greedy, host: true }];
    const counts = [1, 3, 0, 2]; // a verify step of 3 rows, a non-final prefill chunk, 2 rows
    const { params, hostRows } = packDeviceSampling(sampling, counts, 6, 100);
    expect(Array.from(hostRows)).toEqual([1, 2, 3, 4, 5]);
    expect(params.length).toBe(6 * SAMPLE_PARAMS_PER_ROW);
    expect(params[0]).toBe(0.7); // row 0: its own params; host rows get valid greedy params (the NaN never reaches the GPU)
    expect(Number.isNaN(params[SAMPLE_PARAMS_PER_ROW])).toBe(false);
    const V = 100;
    const hostLogits = new Float32Array(5 * V).map((_, i) => i);
    const rows = splitSampled({ ids: Int32Array.of(42, 0, 0, 0, 0, 0), logprobs: new Float32Array(6), hostLogits }, sampling, counts, V);
    expect(Array.from(rows[0]!.ids)).toEqual([42]);
    expect(rows[0]!.logits).toBeUndefined();
    expect(rows[1]!.logits!.length).toBe(3 * V);
    expect(rows[1]!.logits![0]).toBe(0);
    expect(rows[2]!.ids.length).toBe(0);
    expect(rows[3]!.logits![0]).toBe(3 * V); // the 4th host row
    expect(() => splitSampled({ ids: new Int32Array(6), logprobs: new Float32Array(6), hostLogits: new Float32Array(2 * V) }, sampling, counts, V)).toThrow(/fewer host logits rows/);
  });
  test("top log-probabilities come back per row, as many as the row asked for", () => {
    const sampling: GpuSampling[] = [greedy, { ...greedy, topLogprobs: 2 }];
    const topIds = new Int32Array(2 * 20).fill(-7);
    const topLogprobs = new Float32Array(2 * 20);
    topIds.set([4, 9, 1], 20);
    topLogprobs.set([-0.5, -1.5, -3], 20);
    const rows = splitSampled({ ids: Int32Array.of(3, 4), logprobs: new Float32Array(2), topIds, topLogprobs }, sampling, [1, 1], 100);
    expect(rows[0]!.top).toBeUndefined();
    expect(rows[1]!.top).toEqual([[{ token: 4, logprob: -0.5 }, { token: 9, logprob: -1.5 }]]);
    expect(() => splitSampled({ ids: Int32Array.of(3, 4), logprobs: new Float32Array(2) }, sampling, [1, 1], 100)).toThrow(/no top log-probabilities/);
  });
});
