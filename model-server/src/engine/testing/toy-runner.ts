/**
 * A tiny ModelRunner whose "model" is a fixed function of the whole context,
 * read back from its paged KV storage through the block table the engine
 * passes. It makes engine tests strict: a wrong block table, a wrong start
 * position, a missing prefix block or a block overwritten by another sequence
 * changes the output (or throws), while a correct engine reproduces
 * `toyContinuation` exactly. For engine tests only; real models live in src/model.
 *
 * Model: the next token after context c is (c[-1] + 2 c[-2] + len(c)) mod (V - 1),
 * so the EOS id V - 1 never comes out unless asked; logits peak at that token
 * and fall off with distance, so sampling has something to choose from.
 *
 * @example
 * const runner = createToyRunner({ vocabSize: 64 });
 * toyContinuation([1, 2, 3], 5, 64); // what greedy decoding must produce
 */
import type { KvExport, ModelRunner, ModelSpec, StepInput, StepOutput } from "../../model/runner";

export interface ToyRunnerOptions {
  vocabSize?: number;
  maxContext?: number;
  modelId?: string;
  /** Simulated compute time per step. */
  stepDelayMs?: number;
  /** Instead of the default rule, repeat the context with this period (ideal for prompt lookup). */
  period?: number;
  /** The step of this index (0: the first) and every later one never return: a device stuck in a kernel. */
  stuckFromStep?: number;
}

export function toyNext(ctx: readonly number[], V: number, period = 0): number {
  const n = ctx.length;
  if (period > 0 && n >= period) return ctx[n - period]!;
  const a = ctx[n - 1] ?? 0;
  const b = ctx[n - 2] ?? 0;
  return (a + 2 * b + n) % (V - 1);
}

/** The greedy continuation a correct engine produces. */
export function toyContinuation(prompt: readonly number[], count: number, V: number, period = 0): number[] {
  const ctx = [...prompt];
  const out: number[] = [];
  for (let i = 0; i < count; i++) {
    const t = toyNext(ctx, V, period);
    ctx.push(t);
    out.push(t);
  }
  return out;
}

export interface ToyRunner extends ModelRunner {
  /** Steps run and tokens processed, for assertions. */
  readonly stats: { steps: number; tokens: number; maxBatch: number };
}

export function createToyRunner(o: ToyRunnerOptions = {}): ToyRunner {
  const V = o.vocabSize ?? 64;
  const spec: ModelSpec = {
    modelId: o.modelId ?? "toy",
    architecture: "toy",
    vocabSize: V,
    maxContext: o.maxContext ?? 4096,
    numLayers: 1,
    eosTokenIds: [V - 1],
  };
  let kv = new Int32Array(0);
  let B = 16;
  const stats = { steps: 0, tokens: 0, maxBatch: 0 };
  let calls = 0;

  function slot(table: Int32Array, pos: number): number {
    const block = table[Math.floor(pos / B)];
    if (block === undefined) throw new Error(`toy runner: position ${pos} has no block in a table of ${table.length}`);
    return block * B + (pos % B);
  }

  return {
    spec,
    backend: "cpu",
    stats,
    allocateKv(numBlocks, blockSize) {
      B = blockSize;
      kv = new Int32Array(numBlocks * blockSize).fill(-1);
    },
    kvBytesPerBlock: (blockSize) => blockSize * 4,
    async forward(step: StepInput): Promise<StepOutput> {
      if (o.stuckFromStep !== undefined && calls++ >= o.stuckFromStep) return new Promise<StepOutput>(() => {});
      if (o.stepDelayMs) await new Promise((r) => setTimeout(r, o.stepDelayMs));
      stats.steps++;
      stats.maxBatch = Math.max(stats.maxBatch, step.seqs.length);
      // Write every chunk's KV first (as a real layer does), then read contexts.
      for (const s of step.seqs) {
        // A real model has logits only for positions it runs in this step.
        if (s.numLogits > s.tokens.length) throw new Error(`toy runner: ${s.numLogits} logits asked for a chunk of ${s.tokens.length} tokens`);
        if (s.tokens.length === 0) throw new Error("toy runner: empty chunk");
        stats.tokens += s.tokens.length;
        for (let j = 0; j < s.tokens.length; j++) kv[slot(s.blockTable, s.startPos + j)] = s.tokens[j]!;
      }
      return step.seqs.map((s) => {
        const out = new Float32Array(s.numLogits * V);
        const end = s.startPos + s.tokens.length;
        for (let r = 0; r < s.numLogits; r++) {
          const last = end - s.numLogits + r;
          const ctx: number[] = [];
          for (let p = 0; p <= last; p++) {
            const t = kv[slot(s.blockTable, p)]!;
            if (t < 0) throw new Error(`toy runner: position ${p} was never computed`);
            ctx.push(t);
          }
          const h = toyNext(ctx, V, o.period);
          for (let v = 0; v < V; v++) {
            const d = Math.min(Math.abs(v - h), V - Math.abs(v - h));
            out[r * V + v] = -0.7 * d;
          }
        }
        return out;
      });
    },
    exportKv(blockIds): KvExport {
      const data = new Int32Array(blockIds.length * B);
      blockIds.forEach((b, i) => data.set(kv.subarray(b * B, (b + 1) * B), i * B));
      return { numBlocks: blockIds.length, blockSize: B, data: new Uint8Array(data.buffer), dtype: "f32" };
    },
    importKv(blockIds, x) {
      const data = new Int32Array(x.data.buffer, x.data.byteOffset, x.data.byteLength / 4);
      blockIds.forEach((b, i) => kv.set(data.subarray(i * B, (i + 1) * B), b * B));
    },
    close() {
      kv = new Int32Array(0);
    },
  };
}
