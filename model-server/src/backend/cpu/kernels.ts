/**
 * Reference CPU kernels in TypeScript over Float32Array (row-major). The
 * native addon (native.ts) provides faster versions of the hot ones with the
 * same signatures; these stay as the fallback and as the tests' reference.
 *
 * Legend: T rows (tokens), N output features, K input features, D head dim.
 */

/** out[T, N] = x[T, K] . w[N, K]^T (+ bias). Each weight row is read once for all T rows. */
export function linear(x: Float32Array, w: Float32Array, out: Float32Array, T: number, K: number, N: number, bias?: Float32Array): void {
  for (let n = 0; n < N; n++) {
    const wo = n * K;
    const b = bias ? bias[n]! : 0;
    for (let t = 0; t < T; t++) {
      const xo = t * K;
      let s0 = 0;
      let s1 = 0;
      let s2 = 0;
      let s3 = 0;
      let k = 0;
      for (; k + 3 < K; k += 4) {
        s0 += x[xo + k]! * w[wo + k]!;
        s1 += x[xo + k + 1]! * w[wo + k + 1]!;
        s2 += x[xo + k + 2]! * w[wo + k + 2]!;
        s3 += x[xo + k + 3]! * w[wo + k + 3]!;
      }
      for (; k < K; k++) s0 += x[xo + k]! * w[wo + k]!;
      out[t * N + n] = s0 + s1 + (s2 + s3) + b;
    }
  }
}

/** RMSNorm over consecutive groups of `g` values; w [g]. */
export function rmsNorm(x: Float32Array, w: Float32Array, eps: number, out: Float32Array, g: number): void {
  const groups = x.length / g;
  for (let r = 0; r < groups; r++) {
    const o = r * g;
    let ss = 0;
    for (let i = 0; i < g; i++) ss += x[o + i]! * x[o + i]!;
    const inv = 1 / Math.sqrt(ss / g + eps);
    for (let i = 0; i < g; i++) out[o + i] = w[i]! * Math.fround(x[o + i]! * inv);
  }
}

/** Rotate-half RoPE in place: x [T, heads*D]; cos/sin [T, D/2]. */
export function rope(x: Float32Array, T: number, width: number, D: number, cos: Float32Array, sin: Float32Array): void {
  const half = D / 2;
  const heads = width / D;
  for (let t = 0; t < T; t++) {
    const c = t * half;
    for (let h = 0; h < heads; h++) {
      const o = t * width + h * D;
      for (let i = 0; i < half; i++) {
        const a = x[o + i]!;
        const b = x[o + i + half]!;
        const cs = cos[c + i]!;
        const sn = sin[c + i]!;
        x[o + i] = a * cs - b * sn;
        x[o + i + half] = b * cs + a * sn;
      }
    }
  }
}

/** out[T, I] = silu(gu[:, :I]) * gu[:, I:]; gu [T, 2I]. */
export function siluMul(gu: Float32Array, out: Float32Array, T: number, I: number): void {
  for (let t = 0; t < T; t++) {
    const go = t * 2 * I;
    const oo = t * I;
    for (let i = 0; i < I; i++) {
      const g = gu[go + i]!;
      out[oo + i] = (g / (1 + Math.exp(-g))) * gu[go + I + i]!;
    }
  }
}

/**
 * Causal attention of one sequence over the paged cache.
 * q/out rows [qStart, qStart+qLen) of [T, Hq*D]; kCache/vCache [blocks, B, Hkv, D].
 */
export function attentionSeq(
  q: Float32Array,
  out: Float32Array,
  kCache: Float32Array,
  vCache: Float32Array,
  blockTable: Int32Array,
  qStart: number,
  qLen: number,
  startPos: number,
  B: number,
  Hq: number,
  Hkv: number,
  D: number,
  scale: number,
  window: number,
  scores: Float32Array,
): void {
  const group = Hq / Hkv;
  const qWidth = Hq * D;
  const kvRow = Hkv * D;
  for (let i = 0; i < qLen; i++) {
    const pos = startPos + i;
    const lo = window > 0 ? Math.max(0, pos - window + 1) : 0;
    const qo = (qStart + i) * qWidth;
    for (let h = 0; h < Hq; h++) {
      const kvh = Math.floor(h / group) * D;
      const qh = qo + h * D;
      let max = -Infinity;
      for (let j = lo; j <= pos; j++) {
        const slot = blockTable[Math.floor(j / B)]! * B + (j % B);
        const ko = slot * kvRow + kvh;
        let s = 0;
        for (let d = 0; d < D; d++) s += q[qh + d]! * kCache[ko + d]!;
        s *= scale;
        scores[j - lo] = s;
        if (s > max) max = s;
      }
      let sum = 0;
      for (let j = 0; j <= pos - lo; j++) {
        const e = Math.exp(scores[j]! - max);
        scores[j] = e;
        sum += e;
      }
      const inv = 1 / sum;
      const oh = qo + h * D;
      for (let d = 0; d < D; d++) out[oh + d] = 0;
      for (let j = lo; j <= pos; j++) {
        const p = scores[j - lo]! * inv;
        const slot = blockTable[Math.floor(j / B)]! * B + (j % B);
        const vo = slot * kvRow + kvh;
        for (let d = 0; d < D; d++) out[oh + d] = out[oh + d]! + p * vCache[vo + d]!;
      }
    }
  }
}

/** Row-wise softmax then top-k (ties: lower expert id first), optionally renormalized. */
export function routeTopK(logits: Float32Array, T: number, E: number, k: number, renorm: boolean, ids: Int32Array, weights: Float32Array): void {
  const probs = new Float32Array(E);
  for (let t = 0; t < T; t++) {
    const o = t * E;
    let max = -Infinity;
    for (let e = 0; e < E; e++) if (logits[o + e]! > max) max = logits[o + e]!;
    let sum = 0;
    for (let e = 0; e < E; e++) {
      probs[e] = Math.exp(logits[o + e]! - max);
      sum += probs[e]!;
    }
    for (let e = 0; e < E; e++) probs[e] = probs[e]! / sum;
    let total = 0;
    for (let j = 0; j < k; j++) {
      let best = -1;
      let bestP = -Infinity;
      for (let e = 0; e < E; e++) {
        if (probs[e]! > bestP) {
          bestP = probs[e]!;
          best = e;
        }
      }
      ids[t * k + j] = best;
      weights[t * k + j] = bestP;
      total += bestP;
      probs[best] = -Infinity;
    }
    if (renorm) for (let j = 0; j < k; j++) weights[t * k + j] = weights[t * k + j]! / total;
  }
}
