/**
 * ModelConfig (the loader's one description of every architecture) -> the addon's flat config.
 * Pure; the per-architecture switches are the same ones model/moe-model.ts reads.
 *
 * @example
 *   const native = toNativeConfig(config);   // { numLayers, hidden, ..., invFreq, layers }
 */
import type { ModelConfig } from "../../model/config";
import type { NativeModelConfig } from "./native";

/** RoPE inverse frequencies in fp32, computed exactly as model/moe-model.ts does. */
export function ropeInvFreq(config: ModelConfig): Float32Array {
  const D = config.headDim;
  const invFreq = new Float32Array(D / 2);
  for (let i = 0; i < D / 2; i++) {
    invFreq[i] = Math.fround(Math.fround(1 / Math.fround(config.ropeTheta ** Math.fround((2 * i) / D))) / config.ropeLinearFactor);
  }
  return invFreq;
}

export function toNativeConfig(config: ModelConfig, o: { int8Experts?: boolean; moeBlock?: boolean; selfRoute?: boolean } = {}): NativeModelConfig {
  if (config.headDim > 256) throw new RangeError(`head dim ${config.headDim} is above the CUDA attention kernel's 256`);
  if (config.hidden % 8 !== 0) throw new RangeError(`hidden size ${config.hidden} is not a multiple of 8 (MoE permute)`);
  return {
    numLayers: config.numLayers,
    hidden: config.hidden,
    numHeads: config.numHeads,
    numKvHeads: config.numKvHeads,
    headDim: config.headDim,
    vocabSize: config.vocabSize,
    rmsEps: config.rmsEps,
    qkNorm: config.qkNorm === "head" ? 1 : config.qkNorm === "full" ? 2 : 0,
    clipQkv: config.clipQkv ?? 0,
    window: config.slidingWindow ?? 0,
    maxContext: config.maxContext,
    int8Experts: o.int8Experts ?? false,
    ...(o.moeBlock === undefined ? {} : { moeBlock: o.moeBlock }),
    ...(o.selfRoute === undefined ? {} : { selfRoute: o.selfRoute }),
    invFreq: ropeInvFreq(config),
    layers: config.layers.map((l) =>
      l.kind === "dense"
        ? { moe: false, denseIntermediate: l.intermediate, numExperts: 0, topK: 0, intermediate: 0, normTopK: false, sharedIntermediate: 0, sharedGate: false }
        : { moe: true, denseIntermediate: 0, numExperts: l.numExperts, topK: l.topK, intermediate: l.intermediate, normTopK: l.normTopK, sharedIntermediate: l.sharedIntermediate, sharedGate: l.sharedGate },
    ),
  };
}
