/**
 * The one MoE decoder implementation, over the Backend interface. Every
 * supported architecture is this loop with switches read from ModelConfig:
 *
 *   x = embed(tokens)                                     [T, H]
 *   per layer:
 *     h = rmsnorm(x); qkv = h Wqkv^T (+b)                 [T, (Hq+2Hkv) D]
 *     q/k norm (per head: qwen3_moe; whole projection: olmoe), clip (olmoe)
 *     rope(q, k); k, v -> paged cache at each token's slot
 *     x += attention(q, cache) Wo^T                       causal, per sequence
 *     h = rmsnorm(x)
 *     dense layer: x += down(silu(gate h) * up h)
 *     MoE layer:   x += sum_k w_k expert_k(h) (+ shared(h), sigmoid-gated in qwen2_moe)
 *   logits = rmsnorm(x[rows that need logits]) Wlm^T     [R, V]
 *
 * Legend: T tokens in the step (all sequences), H hidden, D head dim, R logit rows, V vocab.
 */
import type { AttentionSeq, Backend, KvCache, Tensor } from "../backend/backend";
import type { ExpertParallel } from "../parallel/expert-parallel";
import type { ModelConfig } from "./config";
import type { StepInput, StepOutput } from "./runner";
import type { ModelWeights } from "./weights";

export interface MoeModel {
  readonly config: ModelConfig;
  /** Runs one step; kv must hold every block the step's block tables name. */
  forward(step: StepInput, kv: KvCache): StepOutput;
}

export interface MoeModelOptions {
  /** Routed experts spread over ranks: the MoE layers delegate to it instead of be.moe (parallel/). */
  expertParallel?: ExpertParallel;
}

export function createMoeModel(config: ModelConfig, weights: ModelWeights, be: Backend, opts: MoeModelOptions = {}): MoeModel {
  const { hidden: H, headDim: D, numHeads: Hq, numKvHeads: Hkv } = config;
  const invFreq = new Float32Array(D / 2);
  for (let i = 0; i < D / 2; i++) {
    // fp32 as in the reference: 1 / theta^(2i/D), divided by the linear scaling factor
    invFreq[i] = Math.fround(Math.fround(1 / Math.fround(config.ropeTheta ** Math.fround((2 * i) / D))) / config.ropeLinearFactor);
  }
  const attnParams = { numHeads: Hq, numKvHeads: Hkv, headDim: D, scale: 1 / Math.sqrt(D), window: config.slidingWindow };

  function forward(step: StepInput, kv: KvCache): StepOutput {
    const B = kv.blockSize;
    let T = 0;
    for (const s of step.seqs) T += s.tokens.length;
    const ids = new Int32Array(T);
    const positions = new Int32Array(T);
    const slots = new Int32Array(T);
    const seqs: AttentionSeq[] = [];
    const logitRows: number[] = [];
    let at = 0;
    for (const s of step.seqs) {
      const n = s.tokens.length;
      const end = s.startPos + n;
      if (s.blockTable.length * B < end) throw new RangeError(`block table of ${s.blockTable.length} blocks cannot hold ${end} positions (block size ${B})`);
      if (s.numLogits > n) throw new RangeError(`numLogits ${s.numLogits} exceeds the ${n} tokens of the chunk`);
      if (end > config.maxContext) throw new RangeError(`position ${end - 1} is past the model's context of ${config.maxContext}`);
      ids.set(s.tokens, at);
      for (let i = 0; i < n; i++) {
        const pos = s.startPos + i;
        positions[at + i] = pos;
        const block = s.blockTable[Math.floor(pos / B)]!;
        if (block < 0 || block >= kv.numBlocks) throw new RangeError(`block id ${block} outside the cache's ${kv.numBlocks} blocks`);
        slots[at + i] = block * B + (pos % B);
      }
      seqs.push({ qStart: at, qLen: n, startPos: s.startPos, blockTable: s.blockTable });
      for (let i = n - s.numLogits; i < n; i++) logitRows.push(at + i);
      at += n;
    }
    if (T === 0) return step.seqs.map(() => new Float32Array(0));

    const x = be.alloc(T, H);
    be.embedding(weights.embed, ids, x);
    const h = be.alloc(T, H);
    const qkv = be.alloc(T, (Hq + 2 * Hkv) * D);
    const q = be.alloc(T, Hq * D);
    const k = be.alloc(T, Hkv * D);
    const v = be.alloc(T, Hkv * D);
    const attn = be.alloc(T, Hq * D);
    const y = be.alloc(T, H);

    for (let l = 0; l < config.numLayers; l++) {
      const w = weights.layers[l]!;
      be.rmsNorm(x, w.inputNorm, config.rmsEps, h);
      be.linear(h, w.qkv, qkv, w.qkvBias);
      be.splitCols(qkv, [q, k, v]);
      if (w.qNorm && w.kNorm) {
        be.rmsNorm(q, w.qNorm, config.rmsEps, q);
        be.rmsNorm(k, w.kNorm, config.rmsEps, k);
      }
      if (config.clipQkv !== null) for (const t of [q, k, v]) be.clamp(t, config.clipQkv);
      be.rope(q, positions, D, invFreq);
      be.rope(k, positions, D, invFreq);
      be.writeKv(kv, l, k, v, slots);
      be.attention(kv, l, q, seqs, attnParams, attn);
      be.linear(attn, w.o, y, w.oBias);
      be.add(x, y);

      be.rmsNorm(x, w.postNorm, config.rmsEps, h);
      if (w.mlp.kind === "dense") {
        mlp(h, w.mlp.w.gateUp, w.mlp.w.down, y);
      } else {
        const m = w.mlp.w;
        const cfg = config.layers[l]!;
        if (cfg.kind !== "moe") throw new Error(`layer ${l}: weights and config disagree`);
        const routerLogits = be.alloc(T, cfg.numExperts);
        be.linear(h, m.router, routerLogits);
        const routing = be.route(routerLogits, cfg.topK, cfg.normTopK);
        if (opts.expertParallel) opts.expertParallel.moe(h, m.experts, routing, y);
        else be.moe(h, m.experts, routing, y);
        if (m.shared) {
          const s = be.alloc(T, H);
          mlp(h, m.shared.gateUp, m.shared.down, s);
          if (m.sharedGate) {
            const g = be.alloc(T, 1);
            be.linear(h, m.sharedGate, g);
            be.gatedAdd(y, s, g);
          } else {
            be.add(y, s);
          }
        }
      }
      be.add(x, y);
    }

    const out: StepOutput = [];
    if (logitRows.length === 0) return step.seqs.map(() => new Float32Array(0));
    const R = logitRows.length;
    const last = be.alloc(R, H);
    be.gatherRows(x, Int32Array.from(logitRows), last);
    be.rmsNorm(last, weights.norm, config.rmsEps, last);
    const logits = be.alloc(R, config.vocabSize);
    be.linear(last, weights.lmHead, logits);
    const host = be.read(logits);
    let r = 0;
    for (const s of step.seqs) {
      out.push(host.subarray(r * config.vocabSize, (r + s.numLogits) * config.vocabSize));
      r += s.numLogits;
    }
    return out;
  }

  function mlp(h: Tensor, gateUp: Tensor, down: Tensor, out: Tensor) {
    const gu = be.alloc(h.rows, gateUp.rows);
    be.linear(h, gateUp, gu);
    const act = be.alloc(h.rows, gateUp.rows / 2);
    be.siluMul(gu, act);
    be.linear(act, down, out);
  }

  return { config, forward };
}
