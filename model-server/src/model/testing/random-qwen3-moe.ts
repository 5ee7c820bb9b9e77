/**
 * A model directory at Qwen3-30B-A3B's shape (hidden 2048, 128 experts of 768, top-8, 32/4 heads of 128, vocab
 * 151,936) with random weights generated on the GPU at load (random-weights.json; bench/serving/random-model.ts), for
 * GPU tests that need the real kernels' shapes without a checkpoint. `overrides` replace config.json keys (layers,
 * experts, top-k, ...).
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";

export const QWEN3_30B_A3B_CONFIG = {
  architectures: ["Qwen3MoeForCausalLM"],
  model_type: "qwen3_moe",
  hidden_size: 2048,
  intermediate_size: 6144,
  moe_intermediate_size: 768,
  num_hidden_layers: 2,
  num_attention_heads: 32,
  num_key_value_heads: 4,
  head_dim: 128,
  num_experts: 128,
  num_experts_per_tok: 8,
  norm_topk_prob: true,
  decoder_sparse_step: 1,
  mlp_only_layers: [],
  vocab_size: 151936,
  max_position_embeddings: 40960,
  rms_norm_eps: 1e-6,
  rope_theta: 1000000,
  tie_word_embeddings: false,
  eos_token_id: 151645,
  bos_token_id: 151643,
};

export function writeRandomQwen3Moe(dir: string, overrides: Record<string, unknown>, seed: number): void {
  writeFileSync(join(dir, "config.json"), JSON.stringify({ ...QWEN3_30B_A3B_CONFIG, ...overrides }));
  writeFileSync(join(dir, "random-weights.json"), JSON.stringify({ seed, zipf: 0 }));
}
