/**
 * The operations the model needs, over tensors the backend owns. The model
 * (model/moe-model.ts) is written once against this interface; the CPU backend
 * implements it now, a CUDA backend later. Tensors are opaque 2-D handles
 * [rows, cols], row-major fp32 in their logical layout; small index data
 * (token ids, positions, KV slots, routing choices) travels as host arrays.
 *
 * Legend: T tokens in the step, H hidden, N output features, K input features,
 * E experts, k top-k, I intermediate, D head dim, Hq/Hkv query/KV heads, B block size.
 *
 * @example
 *   const be = createCpuBackend();
 *   const w = be.weight(data, 64, 32);      // [N=64, K=32]
 *   const y = be.alloc(t, 64);
 *   be.linear(x, w, y);                     // y[T,N] = x[T,K] . w^T
 */
export interface Tensor {
  readonly rows: number;
  readonly cols: number;
}

/** Paged KV storage for all layers: [layers][blocks, B, Hkv, D] for K and for V. */
export interface KvCache {
  readonly numLayers: number;
  readonly numBlocks: number;
  readonly blockSize: number;
  readonly numKvHeads: number;
  readonly headDim: number;
}

/** Routed experts of one layer, held in the backend's preferred layout. */
export interface ExpertWeights {
  readonly numExperts: number;
  readonly hidden: number;
  readonly intermediate: number;
}

/** One sequence's part of an attention call. */
export interface AttentionSeq {
  /** First row of this sequence's queries in the step's [T, ...] tensors. */
  qStart: number;
  qLen: number;
  /** Absolute position of the first query; keys [0, startPos + qLen) are in the cache. */
  startPos: number;
  blockTable: Int32Array;
}

export interface AttentionParams {
  numHeads: number;
  numKvHeads: number;
  headDim: number;
  scale: number;
  /** Attend only to the last `window` positions (inclusive of the query's own); null = all. */
  window: number | null;
}

/** Routing result of one MoE layer: k choices per token, on the host. */
export interface Routing {
  /** [T, k] expert ids. */
  ids: Int32Array;
  /** [T, k] combine weights. */
  weights: Float32Array;
  topK: number;
}

export interface Backend {
  readonly kind: "cpu" | "cuda";

  // --- memory ---
  /** A weight from host fp32 data [rows, cols] (copied or kept, the backend's choice). */
  weight(data: Float32Array, rows: number, cols: number): Tensor;
  /** Routed experts: gateUp [E, 2I, H] (gate rows first, then up), down [E, H, I]. */
  experts(gateUp: Float32Array, down: Float32Array, numExperts: number, intermediate: number, hidden: number): ExpertWeights;
  /** A scratch tensor (contents undefined). */
  alloc(rows: number, cols: number): Tensor;
  /** Host copy of a tensor. */
  read(t: Tensor): Float32Array;
  createKvCache(numLayers: number, numBlocks: number, blockSize: number, numKvHeads: number, headDim: number): KvCache;
  /** [layers, 2, blocks, B, Hkv, D] fp32 bytes of the given blocks. */
  exportKv(kv: KvCache, blockIds: Int32Array): Uint8Array;
  importKv(kv: KvCache, blockIds: Int32Array, data: Uint8Array): void;

  // --- ops ---
  /** out[t] = table[ids[t]]. */
  embedding(table: Tensor, ids: Int32Array, out: Tensor): void;
  /** RMSNorm over groups of w.cols columns (x.cols % w.cols == 0): per head when w.cols = D. */
  rmsNorm(x: Tensor, w: Tensor, eps: number, out: Tensor): void;
  /** out[T, N] = x[T, K] . w[N, K]^T (+ bias[N]). */
  linear(x: Tensor, w: Tensor, out: Tensor, bias?: Tensor): void;
  /** x += y (same shape). */
  add(x: Tensor, y: Tensor): void;
  /** Splits columns: x [T, a+b+...] -> outs [T, a], [T, b], ... */
  splitCols(x: Tensor, outs: Tensor[]): void;
  /** Clamp every element to [-limit, limit]. */
  clamp(x: Tensor, limit: number): void;
  /** Rotate-half RoPE in place on x [T, heads*D] at the given positions; invFreq [D/2]. */
  rope(x: Tensor, positions: Int32Array, headDim: number, invFreq: Float32Array): void;
  /** out[T, I] = silu(gateUp[:, :I]) * gateUp[:, I:]. */
  siluMul(gateUp: Tensor, out: Tensor): void;
  /** Store k, v [T, Hkv*D] at the given cache slots (block * B + offset). */
  writeKv(kv: KvCache, layer: number, k: Tensor, v: Tensor, slots: Int32Array): void;
  /** Causal attention of q [T, Hq*D] over the paged cache -> out [T, Hq*D]. */
  attention(kv: KvCache, layer: number, q: Tensor, seqs: AttentionSeq[], p: AttentionParams, out: Tensor): void;
  /** softmax(logits [T, E]) -> top-k (optionally renormalized to sum 1). */
  route(logits: Tensor, topK: number, renormalize: boolean): Routing;
  /** out[T, H] = sum over k of weight * expert(x) (SwiGLU experts). */
  moe(x: Tensor, experts: ExpertWeights, routing: Routing, out: Tensor): void;
  /** out += sigmoid(gateLogit[t]) * y[t]; gateLogit [T, 1]. */
  gatedAdd(out: Tensor, y: Tensor, gateLogit: Tensor): void;
  /** out[i] = x[rows[i]]. */
  gatherRows(x: Tensor, rows: Int32Array, out: Tensor): void;
}
