/**
 * The CPU backend: fp32 tensors in Float32Arrays, the hot kernels (linear,
 * attention, MoE experts) from the native addon when it is built, the
 * TypeScript reference kernels otherwise. One thread; the runner keeps it off
 * the event loop's critical path.
 *
 * @example
 *   const be = createCpuBackend();            // native kernels when built
 *   const be2 = createCpuBackend({ native: false });
 */
import type { AttentionParams, AttentionSeq, Backend, ExpertWeights, KvCache, Routing, Tensor } from "../backend";
import * as ref from "./kernels";
import { loadNativeKernels, type NativeKernels } from "./native";

export class CpuTensor implements Tensor {
  constructor(
    readonly rows: number,
    readonly cols: number,
    readonly data: Float32Array,
  ) {}
}

class CpuExperts implements ExpertWeights {
  constructor(
    readonly numExperts: number,
    readonly hidden: number,
    readonly intermediate: number,
    /** [E, 2I, H] */
    readonly gateUp: Float32Array,
    /** [E, H, I] */
    readonly down: Float32Array,
  ) {}
}

/** KV storage; SharedArrayBuffer-backed so a runner in a worker and the engine's thread can both address it. */
export class CpuKv implements KvCache {
  readonly k: Float32Array[] = [];
  readonly v: Float32Array[] = [];
  constructor(
    readonly numLayers: number,
    readonly numBlocks: number,
    readonly blockSize: number,
    readonly numKvHeads: number,
    readonly headDim: number,
    storage?: { k: Float32Array[]; v: Float32Array[] },
  ) {
    const n = numBlocks * blockSize * numKvHeads * headDim;
    if (storage) {
      if (storage.k.length !== numLayers || storage.v.length !== numLayers || storage.k.some((a) => a.length !== n) || storage.v.some((a) => a.length !== n)) {
        throw new RangeError(`KV storage does not match ${numLayers} layers x ${numBlocks} blocks x ${blockSize} x ${numKvHeads} x ${headDim}`);
      }
      this.k.push(...storage.k);
      this.v.push(...storage.v);
      return;
    }
    for (let l = 0; l < numLayers; l++) {
      this.k.push(new Float32Array(new SharedArrayBuffer(n * 4)));
      this.v.push(new Float32Array(new SharedArrayBuffer(n * 4)));
    }
  }
}

/** [layers, 2, blocks, B, Hkv, D] fp32 bytes of the given blocks. */
export function exportCpuKv(c: CpuKv, blockIds: Int32Array): Uint8Array {
  const per = c.blockSize * c.numKvHeads * c.headDim;
  const out = new Float32Array(c.numLayers * 2 * blockIds.length * per);
  let at = 0;
  for (let l = 0; l < c.numLayers; l++) {
    for (const src of [c.k[l]!, c.v[l]!]) {
      for (const b of blockIds) {
        if (b < 0 || b >= c.numBlocks) throw new RangeError(`exportKv: block id ${b} outside the cache's ${c.numBlocks} blocks`);
        out.set(src.subarray(b * per, (b + 1) * per), at);
        at += per;
      }
    }
  }
  return new Uint8Array(out.buffer);
}

export function importCpuKv(c: CpuKv, blockIds: Int32Array, data: Uint8Array): void {
  const per = c.blockSize * c.numKvHeads * c.headDim;
  const src = new Float32Array(data.buffer.slice(data.byteOffset, data.byteOffset + data.byteLength));
  if (src.length !== c.numLayers * 2 * blockIds.length * per) throw new RangeError(`importKv: ${src.length} values for ${blockIds.length} blocks (expected ${c.numLayers * 2 * blockIds.length * per})`);
  for (const b of blockIds) if (b < 0 || b >= c.numBlocks) throw new RangeError(`importKv: block id ${b} outside the cache's ${c.numBlocks} blocks`);
  let at = 0;
  for (let l = 0; l < c.numLayers; l++) {
    for (const dst of [c.k[l]!, c.v[l]!]) {
      for (const b of blockIds) {
        dst.set(src.subarray(at, at + per), b * per);
        at += per;
      }
    }
  }
}

const t = (x: Tensor) => x as CpuTensor;

export interface CpuBackendOptions {
  /** Use the native addon's kernels when it is built (default true). */
  native?: boolean;
}

export interface CpuBackend extends Backend {
  /** Whether native kernels are in use. */
  readonly native: boolean;
}

export function createCpuBackend(o: CpuBackendOptions = {}): CpuBackend {
  const nat: NativeKernels | null = o.native === false ? null : loadNativeKernels();
  const linear = nat?.linear ?? ref.linear;
  let scores = new Float32Array(1024);

  const be: CpuBackend = {
    kind: "cpu",
    native: nat !== null,
    weight: (data, rows, cols) => new CpuTensor(rows, cols, data),
    experts: (gateUp, down, E, I, H) => new CpuExperts(E, H, I, gateUp, down),
    alloc: (rows, cols) => new CpuTensor(rows, cols, new Float32Array(rows * cols)),
    read: (x) => t(x).data.slice(),
    createKvCache: (L, nb, bs, hkv, d) => new CpuKv(L, nb, bs, hkv, d),
    exportKv: (kv, blockIds) => exportCpuKv(kv as CpuKv, blockIds),
    importKv: (kv, blockIds, data) => importCpuKv(kv as CpuKv, blockIds, data),

    embedding(table, ids, out) {
      const H = table.cols;
      const src = t(table).data;
      const dst = t(out).data;
      for (let i = 0; i < ids.length; i++) {
        const id = ids[i]!;
        if (id < 0 || id >= table.rows) throw new RangeError(`token id ${id} outside the vocabulary [0, ${table.rows})`);
        dst.set(src.subarray(id * H, (id + 1) * H), i * H);
      }
    },
    rmsNorm: (x, w, eps, out) => ref.rmsNorm(t(x).data, t(w).data, eps, t(out).data, w.cols),
    linear: (x, w, out, bias) => linear(t(x).data, t(w).data, t(out).data, x.rows, x.cols, w.rows, bias ? t(bias).data : undefined),
    add(x, y) {
      const a = t(x).data;
      const b = t(y).data;
      for (let i = 0; i < a.length; i++) a[i] = a[i]! + b[i]!;
    },
    splitCols(x, outs) {
      const src = t(x).data;
      for (let r = 0; r < x.rows; r++) {
        let c = r * x.cols;
        for (const o of outs) {
          t(o).data.set(src.subarray(c, c + o.cols), r * o.cols);
          c += o.cols;
        }
      }
    },
    clamp(x, limit) {
      const a = t(x).data;
      for (let i = 0; i < a.length; i++) a[i] = Math.min(limit, Math.max(-limit, a[i]!));
    },
    rope(x, positions, D, invFreq) {
      const half = D / 2;
      const cos = new Float32Array(positions.length * half);
      const sin = new Float32Array(positions.length * half);
      for (let i = 0; i < positions.length; i++) {
        for (let j = 0; j < half; j++) {
          // fp32 angle, as the reference computes it (matters at long positions)
          const angle = Math.fround(positions[i]! * invFreq[j]!);
          cos[i * half + j] = Math.cos(angle);
          sin[i * half + j] = Math.sin(angle);
        }
      }
      ref.rope(t(x).data, x.rows, x.cols, D, cos, sin);
    },
    siluMul: (gu, out) => ref.siluMul(t(gu).data, t(out).data, gu.rows, out.cols),
    writeKv(kv, layer, k, v, slots) {
      const c = kv as CpuKv;
      const w = c.numKvHeads * c.headDim;
      const kd = t(k).data;
      const vd = t(v).data;
      for (let i = 0; i < slots.length; i++) {
        c.k[layer]!.set(kd.subarray(i * w, (i + 1) * w), slots[i]! * w);
        c.v[layer]!.set(vd.subarray(i * w, (i + 1) * w), slots[i]! * w);
      }
    },
    attention(kv, layer, q, seqs: AttentionSeq[], p: AttentionParams, out) {
      const c = kv as CpuKv;
      for (const s of seqs) {
        const need = s.startPos + s.qLen;
        if (scores.length < need) scores = new Float32Array(need * 2);
        const fn = nat?.attentionSeq ?? ref.attentionSeq;
        fn(t(q).data, t(out).data, c.k[layer]!, c.v[layer]!, s.blockTable, s.qStart, s.qLen, s.startPos, c.blockSize, p.numHeads, p.numKvHeads, p.headDim, p.scale, p.window ?? 0, scores);
      }
    },
    route(logits, topK, renormalize): Routing {
      const ids = new Int32Array(logits.rows * topK);
      const weights = new Float32Array(logits.rows * topK);
      ref.routeTopK(t(logits).data, logits.rows, logits.cols, topK, renormalize, ids, weights);
      return { ids, weights, topK };
    },
    moe(x, experts, routing, out) {
      const ex = experts as CpuExperts;
      const H = ex.hidden;
      const I = ex.intermediate;
      const T = x.rows;
      const xd = t(x).data;
      const od = t(out).data;
      od.fill(0);
      // Group the (token, slot) pairs by expert so each expert's weights are read once per step.
      const counts = new Int32Array(ex.numExperts + 1);
      for (let i = 0; i < routing.ids.length; i++) counts[routing.ids[i]! + 1]!++;
      for (let e = 0; e < ex.numExperts; e++) counts[e + 1]! += counts[e]!;
      const order = new Int32Array(routing.ids.length);
      const fill = counts.slice(0, ex.numExperts);
      for (let i = 0; i < routing.ids.length; i++) order[fill[routing.ids[i]!]!++] = i;
      const maxRows = Math.min(T, routing.ids.length);
      const xs = new Float32Array(maxRows * H);
      const gu = new Float32Array(maxRows * 2 * I);
      const act = new Float32Array(maxRows * I);
      const ys = new Float32Array(maxRows * H);
      for (let e = 0; e < ex.numExperts; e++) {
        const n = counts[e + 1]! - counts[e]!;
        if (n === 0) continue;
        for (let r = 0; r < n; r++) {
          const tok = Math.floor(order[counts[e]! + r]! / routing.topK);
          xs.set(xd.subarray(tok * H, (tok + 1) * H), r * H);
        }
        linear(xs, ex.gateUp.subarray(e * 2 * I * H, (e + 1) * 2 * I * H), gu, n, H, 2 * I);
        ref.siluMul(gu, act, n, I);
        linear(act, ex.down.subarray(e * H * I, (e + 1) * H * I), ys, n, I, H);
        for (let r = 0; r < n; r++) {
          const pair = order[counts[e]! + r]!;
          const tok = Math.floor(pair / routing.topK);
          const wgt = routing.weights[pair]!;
          for (let h = 0; h < H; h++) od[tok * H + h] = od[tok * H + h]! + wgt * ys[r * H + h]!;
        }
      }
    },
    gatedAdd(out, y, gate) {
      const od = t(out).data;
      const yd = t(y).data;
      const gd = t(gate).data;
      const H = out.cols;
      for (let r = 0; r < out.rows; r++) {
        const s = 1 / (1 + Math.exp(-gd[r]!));
        for (let h = 0; h < H; h++) od[r * H + h] = od[r * H + h]! + s * yd[r * H + h]!;
      }
    },
    gatherRows(x, rows, out) {
      const src = t(x).data;
      const dst = t(out).data;
      for (let i = 0; i < rows.length; i++) dst.set(src.subarray(rows[i]! * x.cols, (rows[i]! + 1) * x.cols), i * x.cols);
    },
  };
  return be;
}
