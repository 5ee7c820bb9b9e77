/**
 * The real models the serving benchmark runs at full shape with random weights: their
 * Hugging Face config.json values (the fields the loader reads), parsed by the same
 * loader/hf-config.ts a checkpoint directory goes through.
 *
 * @example
 *   const config = modelShape("qwen3-30b-a3b");   // ModelConfig, 48 layers, 128 experts top-8
 */
import { parseHfConfig } from "../../model-server/src/loader/hf-config";
import type { ModelConfig } from "../../model-server/src/model/config";

const SHAPES: Record<string, Record<string, unknown>> = {
  // Qwen/Qwen3-30B-A3B config.json
  "qwen3-30b-a3b": {
    model_type: "qwen3_moe",
    hidden_size: 2048,
    intermediate_size: 6144,
    moe_intermediate_size: 768,
    num_attention_heads: 32,
    num_key_value_heads: 4,
    head_dim: 128,
    num_hidden_layers: 48,
    num_experts: 128,
    num_experts_per_tok: 8,
    norm_topk_prob: true,
    decoder_sparse_step: 1,
    mlp_only_layers: [],
    rms_norm_eps: 1e-6,
    rope_theta: 1000000,
    max_position_embeddings: 40960,
    vocab_size: 151936,
    tie_word_embeddings: false,
    attention_bias: false,
    bos_token_id: 151643,
    eos_token_id: 151645,
  },
  // deepseek-ai/deepseek-moe-16b-base config.json
  "deepseek-moe-16b": {
    model_type: "deepseek",
    hidden_size: 2048,
    intermediate_size: 10944,
    moe_intermediate_size: 1408,
    num_attention_heads: 16,
    num_key_value_heads: 16,
    num_hidden_layers: 28,
    n_routed_experts: 64,
    n_shared_experts: 2,
    num_experts_per_tok: 6,
    first_k_dense_replace: 1,
    moe_layer_freq: 1,
    norm_topk_prob: false,
    scoring_func: "softmax",
    rms_norm_eps: 1e-6,
    rope_theta: 10000,
    max_position_embeddings: 4096,
    vocab_size: 102400,
    tie_word_embeddings: false,
    attention_bias: false,
    bos_token_id: 100000,
    eos_token_id: 100001,
  },
};

export const SHAPE_NAMES = Object.keys(SHAPES);

/** The named shape's config.json fields (what a checkpoint directory would hold). */
export function shapeConfigJson(name: string): Record<string, unknown> {
  const raw = SHAPES[name];
  if (!raw) throw new Error(`unknown model shape "${name}" (known: ${SHAPE_NAMES.join(", ")})`);
  return { ...raw };
}

/** The special tokens of the real tokenizer (id -> text) that the synthetic one keeps. */
export const SHAPE_SPECIALS: Record<string, [number, string][]> = {
  "qwen3-30b-a3b": [
    [151643, "<|endoftext|>"],
    [151644, "<|im_start|>"],
    [151645, "<|im_end|>"],
  ],
  "deepseek-moe-16b": [
    [100000, "<｜begin▁of▁sentence｜>"],
    [100001, "<｜end▁of▁sentence｜>"],
  ],
};

/** The random model's ordinary token ids end below its lowest special id: prompts draw from [0, this). */
export function ordinaryVocab(shape: string): number {
  const specials = SHAPE_SPECIALS[shape];
  if (!specials) throw new Error(`no special tokens known for shape "${shape}" (pass --vocab)`);
  return Math.min(...specials.map(([id]) => id));
}

/** The named model's config; `layers` keeps only the first n layers (quick checks). */
export function modelShape(name: string, layers?: number): ModelConfig {
  const raw = SHAPES[name];
  if (!raw) throw new Error(`unknown model shape "${name}" (known: ${SHAPE_NAMES.join(", ")})`);
  const cfg = parseHfConfig(layers ? { ...raw, num_hidden_layers: layers } : raw, { modelId: `${name}-random` });
  return cfg;
}
