/**
 * The model's own description: one shape that covers every supported MoE
 * architecture. The loader turns a Hugging Face config.json into this; the
 * model code reads only this (never config.json), so per-architecture
 * differences live in one place (loader/hf-config.ts).
 *
 * Legend: H hidden, E experts, K top-k, I expert intermediate, D head dim.
 */
export type Architecture = "mixtral" | "qwen2_moe" | "qwen3_moe" | "olmoe" | "deepseek_moe";

export interface DenseMlpConfig {
  kind: "dense";
  intermediate: number;
}

export interface MoeMlpConfig {
  kind: "moe";
  numExperts: number;
  topK: number;
  /** Per routed expert. */
  intermediate: number;
  /** Softmax over E, take top-K, then divide by their sum when true. */
  normTopK: boolean;
  /** Shared expert(s) run on every token, folded into one MLP of this width; 0 for none. */
  sharedIntermediate: number;
  /** Qwen2-MoE: the shared expert's output is scaled by sigmoid(x . w_gate). */
  sharedGate: boolean;
}

export type MlpConfig = DenseMlpConfig | MoeMlpConfig;

export interface ModelConfig {
  architecture: Architecture;
  modelId: string;
  vocabSize: number;
  hidden: number;
  numLayers: number;
  numHeads: number;
  numKvHeads: number;
  headDim: number;
  rmsEps: number;
  ropeTheta: number;
  /** Linear RoPE scaling factor (positions divided by it); 1 for none. */
  ropeLinearFactor: number;
  maxContext: number;
  tieEmbeddings: boolean;
  /** "head": RMSNorm per head over D (Qwen3-MoE); "full": over the whole q/k projection (OLMoE). */
  qkNorm: "none" | "head" | "full";
  /** OLMoE clip_qkv: clamp q, k, v to [-c, c]. */
  clipQkv: number | null;
  /** Keys older than this many positions are not attended (Mixtral sliding_window); null for none. */
  slidingWindow: number | null;
  /** Attention projections carry a bias (q, k, v; and o when oBias). */
  qkvBias: boolean;
  oBias: boolean;
  /** One entry per decoder layer. */
  layers: MlpConfig[];
  eosTokenIds: number[];
  bosTokenId: number | null;
}
