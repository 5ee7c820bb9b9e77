/**
 * Hugging Face config.json -> ModelConfig, per architecture. This is the one
 * place that knows how each model family names its settings and which layers
 * are MoE:
 *   mixtral      every layer MoE; softmax -> top-k -> renormalize (always).
 *   qwen2_moe    MoE where (i+1) % decoder_sparse_step == 0 and i not in mlp_only_layers;
 *                shared expert scaled by sigmoid(shared_expert_gate); norm_topk_prob (default false).
 *   qwen3_moe    like qwen2_moe without the shared expert; per-head q/k RMSNorm; norm_topk_prob.
 *   olmoe        every layer MoE; q/k RMSNorm over the whole projection; norm_topk_prob (default false).
 *   deepseek     (v1, deepseek-moe-16b) first_k_dense_replace dense layers, then MoE every
 *                moe_layer_freq; n_shared_experts folded into one MLP; norm_topk_prob (false there).
 *
 * @example
 *   const cfg = parseHfConfig(JSON.parse(text), { modelId: "tiny" });
 */
import type { Architecture, MlpConfig, ModelConfig } from "../model/config";
import { ModelLoadError } from "./errors";

type Json = Record<string, unknown>;

const MODEL_TYPES: Record<string, Architecture> = {
  mixtral: "mixtral",
  qwen2_moe: "qwen2_moe",
  qwen3_moe: "qwen3_moe",
  olmoe: "olmoe",
  deepseek: "deepseek_moe",
  deepseek_moe: "deepseek_moe",
};

export function parseHfConfig(raw: Json, o: { modelId: string; extraEosIds?: number[] }): ModelConfig {
  const modelType = String(raw.model_type ?? "");
  const arch = MODEL_TYPES[modelType];
  if (!arch) throw new ModelLoadError("unsupported_model", `config.json model_type "${modelType}" is not supported (supported: ${Object.keys(MODEL_TYPES).join(", ")})`);
  const num = (key: string, fallback?: number): number => {
    const v = raw[key];
    if (typeof v === "number" && Number.isFinite(v)) return v;
    if (fallback !== undefined) return fallback;
    throw new ModelLoadError("bad_file", `config.json: "${key}" is missing or not a number (model_type ${modelType})`);
  };
  const act = String(raw.hidden_act ?? "silu");
  if (act !== "silu") throw new ModelLoadError("unsupported_model", `config.json hidden_act "${act}" is not supported (only silu)`);

  const hidden = num("hidden_size");
  const numHeads = num("num_attention_heads");
  const numLayers = num("num_hidden_layers");
  const headDim = typeof raw.head_dim === "number" ? raw.head_dim : hidden / numHeads;
  const vocabSize = num("vocab_size");
  const { theta, linearFactor } = rope(raw);
  if (typeof raw.partial_rotary_factor === "number" && raw.partial_rotary_factor !== 1) {
    throw new ModelLoadError("unsupported_model", `config.json partial_rotary_factor ${raw.partial_rotary_factor} is not supported`);
  }
  const layers: MlpConfig[] = [];
  for (let i = 0; i < numLayers; i++) layers.push(mlpFor(arch, raw, i, num));

  let slidingWindow: number | null = null;
  if (arch === "mixtral" && typeof raw.sliding_window === "number") slidingWindow = raw.sliding_window;
  if ((arch === "qwen2_moe" || arch === "qwen3_moe") && raw.use_sliding_window === true) {
    throw new ModelLoadError("unsupported_model", `config.json use_sliding_window=true is not supported for ${modelType}`);
  }
  const eos = new Set<number>([...ids(raw.eos_token_id), ...(o.extraEosIds ?? [])].filter((id) => id >= 0 && id < vocabSize));
  const bos = ids(raw.bos_token_id)[0];
  return {
    architecture: arch,
    modelId: o.modelId,
    vocabSize,
    hidden,
    numLayers,
    numHeads,
    numKvHeads: num("num_key_value_heads", numHeads),
    headDim,
    rmsEps: num("rms_norm_eps", 1e-6),
    ropeTheta: theta,
    ropeLinearFactor: linearFactor,
    maxContext: num("max_position_embeddings"),
    tieEmbeddings: raw.tie_word_embeddings === true,
    qkNorm: arch === "qwen3_moe" ? "head" : arch === "olmoe" ? "full" : "none",
    clipQkv: arch === "olmoe" && typeof raw.clip_qkv === "number" ? raw.clip_qkv : null,
    slidingWindow,
    qkvBias: arch === "qwen2_moe" ? raw.qkv_bias !== false : raw.attention_bias === true,
    // o_proj follows attention_bias in qwen3_moe, olmoe and deepseek; never biased in mixtral, qwen2_moe.
    oBias: arch === "qwen3_moe" || arch === "olmoe" || arch === "deepseek_moe" ? raw.attention_bias === true : false,
    layers,
    eosTokenIds: [...eos],
    bosTokenId: bos !== undefined && bos < vocabSize ? bos : null,
  };
}

function ids(v: unknown): number[] {
  if (typeof v === "number") return [v];
  if (Array.isArray(v)) return v.filter((x): x is number => typeof x === "number");
  return [];
}

function rope(raw: Json): { theta: number; linearFactor: number } {
  const params = (raw.rope_parameters ?? raw.rope_scaling ?? null) as Json | null;
  const type = String(params?.rope_type ?? params?.type ?? "default");
  const theta = typeof params?.rope_theta === "number" ? params.rope_theta : typeof raw.rope_theta === "number" ? raw.rope_theta : 10000;
  if (type === "default") return { theta, linearFactor: 1 };
  if (type === "linear" && typeof params?.factor === "number") return { theta, linearFactor: params.factor };
  throw new ModelLoadError("unsupported_model", `config.json rope type "${type}" is not supported (default, linear)`);
}

function mlpFor(arch: Architecture, raw: Json, i: number, num: (k: string, f?: number) => number): MlpConfig {
  const dense = (): MlpConfig => ({ kind: "dense", intermediate: num("intermediate_size") });
  const experts = () => num("num_experts", typeof raw.num_local_experts === "number" ? raw.num_local_experts : undefined);
  switch (arch) {
    case "mixtral":
      return { kind: "moe", numExperts: num("num_local_experts"), topK: num("num_experts_per_tok"), intermediate: num("intermediate_size"), normTopK: true, sharedIntermediate: 0, sharedGate: false };
    case "olmoe":
      return { kind: "moe", numExperts: experts(), topK: num("num_experts_per_tok"), intermediate: num("intermediate_size"), normTopK: raw.norm_topk_prob === true, sharedIntermediate: 0, sharedGate: false };
    case "qwen2_moe":
    case "qwen3_moe": {
      const onlyMlp = Array.isArray(raw.mlp_only_layers) ? (raw.mlp_only_layers as number[]) : [];
      const step = num("decoder_sparse_step", 1);
      const e = experts();
      if (onlyMlp.includes(i) || e <= 0 || (i + 1) % step !== 0) return dense();
      const shared = arch === "qwen2_moe" ? num("shared_expert_intermediate_size", 0) : 0;
      return { kind: "moe", numExperts: e, topK: num("num_experts_per_tok"), intermediate: num("moe_intermediate_size"), normTopK: raw.norm_topk_prob === true, sharedIntermediate: shared, sharedGate: shared > 0 };
    }
    case "deepseek_moe": {
      const routed = typeof raw.n_routed_experts === "number" ? raw.n_routed_experts : 0;
      const freq = num("moe_layer_freq", 1);
      if (!routed || i < num("first_k_dense_replace", 0) || i % freq !== 0) return dense();
      const scoring = String(raw.scoring_func ?? "softmax");
      if (scoring !== "softmax") throw new ModelLoadError("unsupported_model", `config.json scoring_func "${scoring}" is not supported (softmax)`);
      const moeI = num("moe_intermediate_size");
      return { kind: "moe", numExperts: routed, topK: num("num_experts_per_tok"), intermediate: moeI, normTopK: raw.norm_topk_prob === true, sharedIntermediate: moeI * num("n_shared_experts", 0), sharedGate: false };
    }
  }
}
