/**
 * Random weights at a model's real shapes, generated on the GPU (no checkpoint, nothing on
 * disk): for serving benchmarks of models too large to ship. Each matrix is uniform in
 * [-sqrt(3/K), sqrt(3/K)] for K inputs (unit-variance activations stay unit-variance), norms
 * are 1, biases 0, routers fp32. Deterministic for a seed.
 *
 * @example
 *   const model = addon.createModel(toNativeConfig(config));
 *   addon.bind(model, randomNativeWeights(addon, model, config, 1));
 */
import type { ModelConfig } from "../../model/config";
import { expectedDistinctExperts } from "./expected-experts";
import type { CudaAddon, ModelHandle, NativeLayerWeights, NativeModelWeights } from "./native";
import { zipfBias } from "./zipf-bias";

export { zipfBias } from "./zipf-bias";

export interface RandomWeightOptions {
  /**
   * Zipf-skewed expert load: router logits get bias[e] = -zipf * ln(1 + rank(e)) for selection
   * (ranks shuffled per layer), as dispatch v1 biased vLLM's router. 0 = uniform.
   */
  zipf?: number;
  onProgress?: (layer: number) => void;
}

export function randomNativeWeights(addon: CudaAddon, model: ModelHandle, c: ModelConfig, seed: number, o: RandomWeightOptions = {}): NativeModelWeights {
  let next = seed * 1_000_003;
  const mat = (rows: number, cols: number, fp32 = false) => addon.random(model, rows * cols, Math.sqrt(3 / cols), next++, !fp32);
  const ones = (n: number) => addon.fill(model, n, 1, false);
  const zeros = (n: number) => addon.fill(model, n, 0, false);
  const { hidden: H, headDim: D, numHeads: Hq, numKvHeads: Hkv } = c;
  const layers: NativeLayerWeights[] = c.layers.map((l, i) => {
    const base = {
      inputNorm: ones(H),
      postNorm: ones(H),
      qkv: mat((Hq + 2 * Hkv) * D, H),
      qkvBias: c.qkvBias ? zeros((Hq + 2 * Hkv) * D) : -1,
      o: mat(H, Hq * D),
      oBias: c.oBias ? zeros(H) : -1,
      qNorm: c.qkNorm === "head" ? ones(D) : c.qkNorm === "full" ? ones(Hq * D) : -1,
      kNorm: c.qkNorm === "head" ? ones(D) : c.qkNorm === "full" ? ones(Hkv * D) : -1,
    };
    o.onProgress?.(i);
    if (l.kind === "dense") return { ...base, gateUp: mat(2 * l.intermediate, H), down: mat(H, l.intermediate) };
    return {
      ...base,
      router: mat(l.numExperts, H, true),
      routerBias: o.zipf ? addon.upload(model, zipfBias(l.numExperts, o.zipf, seed * 7919 + i), false) : -1,
      gateUp: addon.random(model, l.numExperts * 2 * l.intermediate * H, Math.sqrt(3 / H), next++, true),
      down: addon.random(model, l.numExperts * H * l.intermediate, Math.sqrt(3 / l.intermediate), next++, true),
      sharedGateUp: l.sharedIntermediate > 0 ? mat(2 * l.sharedIntermediate, H) : -1,
      sharedDown: l.sharedIntermediate > 0 ? mat(H, l.sharedIntermediate) : -1,
      sharedGate: l.sharedGate ? mat(1, H, true) : -1,
    };
  });
  const embed = mat(c.vocabSize, H);
  return { embed, norm: ones(H), lmHead: c.tieEmbeddings ? embed : mat(c.vocabSize, H), layers };
}

/** bf16 bytes of layer i's weights (for progress). */
export function layerWeightBytes(c: ModelConfig, i: number): number {
  const { hidden: H, headDim: D, numHeads: Hq, numKvHeads: Hkv } = c;
  const l = c.layers[i]!;
  const attn = (Hq + 2 * Hkv) * D * H + H * Hq * D;
  const mlp = l.kind === "dense" ? 3 * l.intermediate * H : l.numExperts * 3 * l.intermediate * H + 3 * l.sharedIntermediate * H + l.numExperts * H * 2;
  return 2 * (attn + mlp);
}

/**
 * Bytes of weights one decode step of `batch` tokens reads at least (each expert read once):
 * expertBytes 1 for int8 experts (plus their fp32 row scales); zipf > 0 for the random models'
 * skewed routing (fewer distinct experts: expected-experts.ts), uniform otherwise.
 */
export function decodeWeightBytes(c: ModelConfig, batch: number, expertBytes: 1 | 2 = 2, zipf = 0): number {
  const { hidden: H, headDim: D, numHeads: Hq, numKvHeads: Hkv } = c;
  let params = 0;
  let fp32 = 0;
  let experts = 0;
  for (const l of c.layers) {
    params += (Hq + 2 * Hkv) * D * H + H * Hq * D;
    if (l.kind === "dense") {
      params += 3 * l.intermediate * H;
      continue;
    }
    fp32 += l.numExperts * H;
    const distinct = expectedDistinctExperts(l.numExperts, l.topK, batch, { zipf });
    experts += distinct * 3 * l.intermediate * H;
    if (expertBytes === 1) fp32 += distinct * (2 * l.intermediate + H);
    params += 3 * l.sharedIntermediate * H;
  }
  params += c.vocabSize * H + batch * H; // LM head + embedding rows
  return params * 2 + experts * expertBytes + fp32 * 4;
}
