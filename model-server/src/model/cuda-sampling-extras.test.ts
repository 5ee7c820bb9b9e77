/**
 * Penalties and top log-probabilities on the GPU (native-cuda/src/sampling_extras.cuh; GPU only, skipped elsewhere),
 * against the host on the same step's logits at a real vocabulary (151,936 ids, a one-layer random Qwen3-30B-A3B):
 * the top ids and their raw log-probabilities as the host's scoreToken gives them; greedy rows under penalties as
 * the host's sampler picks them; a chained step's input token counted once more on the device; and the engine over
 * the runner itself (chained decode steps) giving the logits path's tokens and top alternatives, and its greedy
 * verify steps (prompt lookup) sampled on the device giving the logits path's tokens. It also prints what
 * a decode step of 64 sequences costs with these rows on the device against the same rows sampled on the host.
 */
import { expect, test } from "bun:test";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { probeCuda } from "../backend/cuda/native";
import { penaltyPairs } from "../engine/gpu-sampling";
import { createEngine, type GenerateParams } from "../engine/engine";
import { sampleToken, scoreToken } from "../engine/sampler";
import { penalizedLikeDevice, sampleRowLikeDevice } from "../engine/testing/device-sampling-runner";
import { runnerView } from "../engine/testing/runner-view";
import type { ModelRunner, StepInput } from "./runner";
import { createCudaRunner, type CudaModelRunner, type GpuSampling } from "./cuda-runner";
import { writeRandomQwen3Moe } from "./testing/random-qwen3-moe";

const probe = probeCuda();
const GOLDEN = [join(import.meta.dir, "..", "..", "fixtures", "golden", "qwen3_moe"), join(process.cwd(), "model-server", "fixtures", "golden", "qwen3_moe")].find((d) => existsSync(d))!;

const greedy: GpuSampling = { temperature: 0, topK: 0, topP: 1, seed: 0, step: 0 };
const rng = () => {
  let s = 12345;
  return () => ((s = (s * 1103515245 + 12345) % 2 ** 31), s / 2 ** 31);
};

async function withRandomModel(f: (runner: CudaModelRunner) => Promise<void>): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "sampler-extras-"));
  try {
    writeRandomQwen3Moe(dir, { num_hidden_layers: 1 }, 7);
    const runner = await createCudaRunner({ dir });
    try {
      await f(runner);
    } finally {
      runner.close();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** n prompts of 4 tokens, one sequence per block, as one prefill step. */
function prefill(n: number, V: number): StepInput {
  const next = rng();
  return { seqs: Array.from({ length: n }, (_, s) => ({ tokens: Int32Array.from({ length: 4 }, () => Math.floor(next() * V)), startPos: 0, blockTable: Int32Array.of(s), numLogits: 1 })) };
}

/** The ids of the row's largest logits, best first. */
function best(row: Float32Array, n: number): number[] {
  return Array.from(row.keys())
    .sort((a, b) => row[b]! - row[a]! || a - b)
    .slice(0, n);
}

test.skipIf(!probe.ok)("top log-probabilities and penalties at 151,936 ids: the host's picks and raw log-probabilities", async () => {
  await withRandomModel(async (runner) => {
    expect(runner.samplingExtras).toBe(true);
    const V = runner.spec.vocabSize;
    runner.allocateKv(16, 16);
    const step = prefill(8, V);
    const rows = await runner.forward(step);
    const pairsOf = (ids: number[]) => Int32Array.from(ids.flatMap((t, i) => [t, 1 + (i % 3)]));
    const top = rows.map((r) => best(r, 40));
    const cases: GpuSampling[] = [
      { ...greedy, topLogprobs: 20 },
      { ...greedy, frequencyPenalty: 2, penalties: pairsOf(top[1]!.slice(0, 5)) },
      { ...greedy, presencePenalty: 1.5, penalties: pairsOf(top[2]!.slice(0, 3)), topLogprobs: 5 },
      { ...greedy, frequencyPenalty: -0.5, presencePenalty: 0.25, penalties: pairsOf(top[3]!.slice(2, 30)), banned: [top[3]![0]!] },
      { ...greedy, topLogprobs: 1 },
      { ...greedy, presencePenalty: 2, penalties: pairsOf([top[5]![0]!, 0, V - 1]), topLogprobs: 20 },
      greedy,
      { ...greedy, frequencyPenalty: 0.1, penalties: new Int32Array(0), topLogprobs: 3 },
    ];
    const out = await runner.forwardSampled(step, cases);
    cases.forEach((g, i) => {
      const raw = rows[i]!;
      const counts = new Map<number, number>();
      const pen = g.penalties ?? new Int32Array(0);
      for (let k = 0; k < pen.length; k += 2) counts.set(pen[k]!, pen[k + 1]!);
      const host = sampleToken(
        raw,
        { temperature: 0, topP: 1, topK: 0, frequencyPenalty: g.frequencyPenalty ?? 0, presencePenalty: g.presencePenalty ?? 0 },
        { counts, banned: g.banned ?? [], rng: { next: () => 0 }, topLogprobs: g.topLogprobs ?? 0 },
      );
      const o = out[i]!;
      expect(o.ids[0]).toBe(host.token);
      expect(Math.abs(o.logprobs[0]! - host.logprob)).toBeLessThan(1e-3);
      const k = g.topLogprobs ?? 0;
      if (k === 0) return expect(o.top).toBeUndefined();
      expect(o.top![0]!.map((t) => t.token)).toEqual(host.top.map((t) => t.token));
      o.top![0]!.forEach((t, q) => expect(Math.abs(t.logprob - host.top[q]!.logprob)).toBeLessThan(1e-3));
    });
    // the penalties moved greedy rows off their argmax
    expect(out[1]!.ids[0]).not.toBe(top[1]![0]);
    expect(out[5]!.ids[0]).not.toBe(top[5]![0]);

    // drawn rows under penalties: the host reference of the device sampler on the penalized row, over many seeds
    // (the device bisects the top-k / top-p threshold: at most 1 draw in 50 may land on the other side)
    let total = 0;
    let differ = 0;
    for (let seed = 0; seed < 100; seed++) {
      const g: GpuSampling = { temperature: 0.8, topK: seed % 2 ? 50 : 0, topP: seed % 3 ? 0.9 : 1, seed: 500 + seed, step: seed, frequencyPenalty: 0.6, presencePenalty: 0.4, penalties: pairsOf(top[0]!.slice(0, 20)) };
      const [o] = await runner.forwardSampled({ seqs: [step.seqs[0]!] }, [g]);
      const ref = sampleRowLikeDevice(penalizedLikeDevice(rows[0]!, g, step.seqs[0]!.tokens), g);
      total++;
      if (o!.ids[0] !== ref.id) differ++, console.log(`[sampling-extras] seed ${500 + seed}: device ${o!.ids[0]}, reference ${ref.id}`);
      else expect(Math.abs(o!.logprobs[0]! - scoreToken(rows[0]!, ref.id, 0).logprob)).toBeLessThan(1e-3);
    }
    console.log(`[sampling-extras] penalized draws: ${total - differ}/${total} equal to the host reference`);
    expect(differ).toBeLessThanOrEqual(Math.floor(total / 50));
  });
}, 60_000);

test.skipIf(!probe.ok)("a chained step counts its input token (the id the step before sampled) once more", async () => {
  await withRandomModel(async (runner) => {
    const V = runner.spec.vocabSize;
    runner.allocateKv(16, 16);
    const step = prefill(2, V);
    const first = await runner.forwardSampled(step, [greedy, greedy]);
    const x = [first[0]!.ids[0]!, first[1]!.ids[0]!];
    const next = (tokens: number[]): StepInput => ({ seqs: step.seqs.map((s, i) => ({ tokens: Int32Array.of(tokens[i]!), startPos: 4, blockTable: s.blockTable, numLogits: 1 })) });
    // row 0: presence penalty on the chained token alone; row 1: the host already counted x[1] twice and the chained
    // token is x[1] again (three in all)
    const sampling: GpuSampling[] = [
      { ...greedy, presencePenalty: 50, penalties: new Int32Array(0), penalizeInput: true, step: 1 },
      { ...greedy, frequencyPenalty: 4, penalties: Int32Array.of(x[1]!, 2), penalizeInput: true, step: 1 },
    ];
    const chained = await runner.forwardSampled(next([0, 0]), sampling, Int32Array.of(0, 1));
    const logits = await runner.forward(next(x)); // the same step with the tokens known
    const host0 = sampleToken(logits[0]!, { temperature: 0, topP: 1, topK: 0, frequencyPenalty: 0, presencePenalty: 50 }, { counts: new Map([[x[0]!, 1]]), banned: [], rng: { next: () => 0 }, topLogprobs: 0 });
    const host1 = sampleToken(logits[1]!, { temperature: 0, topP: 1, topK: 0, frequencyPenalty: 4, presencePenalty: 0 }, { counts: new Map([[x[1]!, 3]]), banned: [], rng: { next: () => 0 }, topLogprobs: 0 });
    expect(chained[0]!.ids[0]).toBe(host0.token);
    expect(chained[1]!.ids[0]).toBe(host1.token);
  });
});

test.skipIf(!probe.ok)("engine over the CUDA runner: penalized and top_logprobs requests on the device, the logits path's tokens", async () => {
  const cuda = await createCudaRunner({ dir: GOLDEN });
  try {
    const V = cuda.spec.vocabSize;
    const prompts = [0, 1, 2, 3].map((s) => Array.from({ length: 5 + 3 * s }, (_, i) => (s * 31 + i * 7 + 1) % V));
    const reqs: GenerateParams[] = [
      { promptTokenIds: prompts[0]!, sampling: { frequencyPenalty: 1.2 }, stop: { maxTokens: 32, ignoreEos: true } },
      { promptTokenIds: prompts[1]!, sampling: { presencePenalty: 1.5 }, topLogprobs: 5, stop: { maxTokens: 32, ignoreEos: true } },
      { promptTokenIds: prompts[2]!, topLogprobs: 20, stop: { maxTokens: 32, ignoreEos: true } },
      { promptTokenIds: prompts[3]!, stop: { maxTokens: 32, ignoreEos: true } },
    ];
    const { runner: logitsOnly, calls } = runnerView(cuda, true);
    const run = async (runner: ModelRunner) => {
      const steps: { lookahead: boolean; deviceSampled: boolean }[] = [];
      const engine = createEngine({ runner, blockSize: 16, numKvBlocks: 64, maxNumSeqs: 8, maxBatchTokens: 128, maxQueue: 16, serverId: "cuda-extras", onStep: (s) => steps.push(s) });
      const outs = await Promise.all(
        reqs.map(async (r) => {
          const tokens: number[] = [];
          const tops: { token: number; logprob: number }[][] = [];
          for await (const o of engine.generate(r)) {
            tokens.push(...o.tokenIds);
            for (const l of o.logprobs) tops.push(l.top);
          }
          return { tokens, tops };
        }),
      );
      await engine.close();
      return { outs, steps };
    };
    const ref = await run(logitsOnly);
    expect(calls.every((c) => c === "forward")).toBe(true);
    const dev = await run(cuda);
    console.log(`[sampling-extras] engine: ${dev.steps.length} steps, ${dev.steps.filter((s) => s.deviceSampled).length} device-sampled, ${dev.steps.filter((s) => s.lookahead).length} chained`);
    expect(dev.steps.every((s) => s.deviceSampled)).toBe(true);
    expect(dev.steps.filter((s) => s.lookahead).length).toBeGreaterThan(20);
    dev.outs.forEach((o, i) => {
      expect(o.tokens).toEqual(ref.outs[i]!.tokens);
      o.tops.forEach((t, j) => {
        expect(t.map((x) => x.token)).toEqual(ref.outs[i]!.tops[j]!.map((x) => x.token));
        t.forEach((x, q) => expect(Math.abs(x.logprob - ref.outs[i]!.tops[j]![q]!.logprob)).toBeLessThan(1e-3));
      });
    });
    expect(dev.outs[1]!.tops.every((t) => t.length === 5)).toBe(true);
    expect(dev.outs[2]!.tops.every((t) => t.length === 20)).toBe(true);
  } finally {
    cuda.close();
  }
});

test.skipIf(!probe.ok)("engine over the CUDA runner: greedy verify steps (prompt lookup) sampled on the device, the logits path's tokens", async () => {
  const cuda = await createCudaRunner({ dir: GOLDEN });
  try {
    const V = cuda.spec.vocabSize;
    const unit = Array.from({ length: 9 }, (_, i) => (i * 13 + 5) % V);
    const reqs: GenerateParams[] = [
      { promptTokenIds: [...unit, ...unit, ...unit], stop: { maxTokens: 40, ignoreEos: true } },
      { promptTokenIds: [3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5], stop: { maxTokens: 40, ignoreEos: true }, topLogprobs: 2 },
    ];
    const { runner: logitsOnly } = runnerView(cuda, true);
    const run = async (runner: ModelRunner) => {
      const steps: { deviceSampled: boolean; tokens: number; sequences: number; prefillTokens: number }[] = [];
      const engine = createEngine({ runner, blockSize: 16, numKvBlocks: 64, maxNumSeqs: 8, maxBatchTokens: 128, maxQueue: 16, serverId: "cuda-verify", specTokens: 4, onStep: (s) => steps.push(s) });
      const outs = await Promise.all(
        reqs.map(async (r) => {
          const tokens: number[] = [];
          for await (const o of engine.generate(r)) tokens.push(...o.tokenIds);
          return tokens;
        }),
      );
      await engine.close();
      return { outs, steps };
    };
    await run(cuda); // warm-up (graph captures)
    let t = performance.now();
    const ref = await run(logitsOnly);
    const refMs = performance.now() - t;
    t = performance.now();
    const dev = await run(cuda);
    const devMs = performance.now() - t;
    console.log(`[sampling-extras] verify: ${devMs.toFixed(1)} ms on the device path, ${refMs.toFixed(1)} ms on the logits path (2 x 40 tokens)`);
    const verifySteps = dev.steps.filter((s) => s.prefillTokens === 0 && s.tokens > s.sequences);
    console.log(`[sampling-extras] verify: ${dev.steps.length} steps (${ref.steps.length} on the logits path), ${verifySteps.length} with proposals, all device-sampled: ${dev.steps.every((s) => s.deviceSampled)}`);
    expect(dev.outs).toEqual(ref.outs);
    expect(dev.steps.every((s) => s.deviceSampled)).toBe(true);
    expect(verifySteps.length).toBeGreaterThan(3);
    expect(dev.steps.length).toBeLessThan(40);
  } finally {
    cuda.close();
  }
}, 60_000);

// Not a pass/fail test: what 64 penalized top-20 rows cost per decode step on the device, against the same rows
// downloaded and sampled on the host (the path before), over the one-layer model (the sampler's share is what moves).
test.skipIf(!probe.ok)("cost of penalties and top log-probabilities per decode step of 64 sequences (printed)", async () => {
  await withRandomModel(async (runner) => {
    const V = runner.spec.vocabSize;
    const B = 64;
    runner.allocateKv(B, 16);
    const step = prefill(B, V);
    await runner.forwardSampled(step, step.seqs.map(() => greedy));
    const decode: StepInput = { seqs: step.seqs.map((s, i) => ({ tokens: Int32Array.of((i * 977) % V), startPos: 4, blockTable: s.blockTable, numLogits: 1 })) };
    const counts = new Map<number, number>(Array.from({ length: 200 }, (_, i) => [(i * 7919) % V, 1 + (i % 4)] as [number, number]));
    const pen: GpuSampling = { ...greedy, temperature: 0.8, seed: 3, frequencyPenalty: 0.5, presencePenalty: 0.5, penalties: penaltyPairs(counts), topLogprobs: 20 };
    const time = async (f: () => Promise<unknown>) => {
      for (let i = 0; i < 3; i++) await f();
      const ms: number[] = [];
      for (let i = 0; i < 15; i++) {
        const t = performance.now();
        await f();
        ms.push(performance.now() - t);
      }
      return ms.sort((a, b) => a - b)[7]!;
    };
    const plain = await time(() => runner.forwardSampled(decode, decode.seqs.map(() => ({ ...greedy, temperature: 0.8, seed: 3 }))));
    const device = await time(() => runner.forwardSampled(decode, decode.seqs.map(() => pen)));
    const host = await time(async () => {
      const rows = await runner.forwardSampled(decode, decode.seqs.map(() => ({ ...greedy, host: true })));
      let n = 0;
      for (const r of rows) n += sampleToken(r.logits!, { temperature: 0.8, topP: 1, topK: 0, frequencyPenalty: 0.5, presencePenalty: 0.5 }, { counts, banned: [], rng: { next: () => 0.5 }, topLogprobs: 20 }).token;
      return n;
    });
    console.log(`[sampling-extras] batch ${B}, ${V} ids, 200 penalized ids + top-20 per row: step ${plain.toFixed(2)} ms plain, ${device.toFixed(2)} ms on the device, ${host.toFixed(2)} ms sampled on the host`);
    expect(device).toBeLessThan(host);
    // a greedy verify step of one sequence with 4 proposals (5 logits rows): argmax ids on the device against the
    // rows downloaded and sampled here as acceptStep does (what the engine did before)
    const verify: StepInput = { seqs: [{ tokens: Int32Array.of(5, 6, 7, 8, 9), startPos: 4, blockTable: step.seqs[0]!.blockTable, numLogits: 5 }] };
    const onDevice = await time(() => runner.forwardSampled(verify, [greedy]));
    const onHost = await time(async () => {
      const [rows] = await runner.forward(verify);
      let n = 0;
      const opts = { temperature: 0, topP: 1, topK: 0, frequencyPenalty: 0, presencePenalty: 0 };
      for (let j = 0; j < 5; j++) n += sampleToken(rows!.subarray(j * V, (j + 1) * V), opts, { counts: new Map(), banned: [], rng: { next: () => 0 }, topLogprobs: 0 }).token;
      return n;
    });
    console.log(`[sampling-extras] verify step, 5 rows at ${V} ids: ${onDevice.toFixed(2)} ms sampled on the device, ${onHost.toFixed(2)} ms with the logits on the host`);
  });
}, 120_000);
