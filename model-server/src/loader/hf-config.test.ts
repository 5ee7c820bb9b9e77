import { expect, test } from "bun:test";
import { parseHfConfig } from "./hf-config";

const base = { vocab_size: 100, hidden_size: 32, num_attention_heads: 4, num_key_value_heads: 2, num_hidden_layers: 4, max_position_embeddings: 64, intermediate_size: 48 };
const kinds = (c: ReturnType<typeof parseHfConfig>) => c.layers.map((l) => (l.kind === "moe" ? `moe${l.sharedIntermediate ? "+s" : ""}${l.normTopK ? "/n" : ""}` : "dense"));

test("qwen2_moe: mlp_only_layers and decoder_sparse_step pick dense layers; shared expert gated; no renormalization by default", () => {
  const c = parseHfConfig({ ...base, model_type: "qwen2_moe", num_experts: 8, num_experts_per_tok: 2, moe_intermediate_size: 16, shared_expert_intermediate_size: 24, mlp_only_layers: [0], decoder_sparse_step: 2 }, { modelId: "m" });
  expect(kinds(c)).toEqual(["dense", "moe+s", "dense", "moe+s"]);
  expect(c.qkvBias).toBe(true);
  const l = c.layers[1]!;
  expect(l.kind === "moe" && l.sharedGate).toBe(true);
});

test("deepseek (v1): first_k_dense_replace dense layers, shared experts folded, softmax without renormalization", () => {
  const c = parseHfConfig({ ...base, model_type: "deepseek", n_routed_experts: 8, n_shared_experts: 2, num_experts_per_tok: 6, moe_intermediate_size: 12, first_k_dense_replace: 1, moe_layer_freq: 1, norm_topk_prob: false, rope_theta: 10000 }, { modelId: "m" });
  expect(c.architecture).toBe("deepseek_moe");
  expect(kinds(c)).toEqual(["dense", "moe+s", "moe+s", "moe+s"]);
  const l = c.layers[1]!;
  expect(l.kind === "moe" && l.sharedIntermediate).toBe(24);
  expect(l.kind === "moe" && l.sharedGate).toBe(false);
  expect(() => parseHfConfig({ ...base, model_type: "deepseek", n_routed_experts: 8, num_experts_per_tok: 2, moe_intermediate_size: 12, scoring_func: "sigmoid" }, { modelId: "m" })).toThrow(/scoring_func "sigmoid"/);
});

test("mixtral always renormalizes; olmoe and qwen3 follow norm_topk_prob; q/k norm kinds", () => {
  const mix = parseHfConfig({ ...base, model_type: "mixtral", num_local_experts: 4, num_experts_per_tok: 2, rope_parameters: { rope_type: "default", rope_theta: 1e6 } }, { modelId: "m" });
  expect(kinds(mix)).toEqual(["moe/n", "moe/n", "moe/n", "moe/n"]);
  expect(mix.ropeTheta).toBe(1e6);
  const olmoe = parseHfConfig({ ...base, model_type: "olmoe", num_experts: 8, num_experts_per_tok: 2 }, { modelId: "m" });
  expect(kinds(olmoe)[0]).toBe("moe");
  expect(olmoe.qkNorm).toBe("full");
  const q3 = parseHfConfig({ ...base, model_type: "qwen3_moe", num_local_experts: 8, num_experts_per_tok: 2, moe_intermediate_size: 8, norm_topk_prob: true, head_dim: 16 }, { modelId: "m" });
  expect(kinds(q3)[0]).toBe("moe/n");
  expect(q3.qkNorm).toBe("head");
  expect(q3.headDim).toBe(16);
});

test("attention biases: qwen2_moe q/k/v only; attention_bias covers q/k/v/o in qwen3_moe, olmoe, deepseek", () => {
  const q2 = parseHfConfig({ ...base, model_type: "qwen2_moe", num_experts: 8, num_experts_per_tok: 2, moe_intermediate_size: 8 }, { modelId: "m" });
  expect([q2.qkvBias, q2.oBias]).toEqual([true, false]);
  for (const t of ["qwen3_moe", "olmoe", "deepseek"]) {
    const c = parseHfConfig({ ...base, model_type: t, num_experts: 8, num_experts_per_tok: 2, moe_intermediate_size: 8, n_routed_experts: 8, attention_bias: true }, { modelId: "m" });
    expect([t, c.qkvBias, c.oBias]).toEqual([t, true, true]);
  }
});

test("eos ids merge config and extras and drop ids outside the vocabulary", () => {
  const c = parseHfConfig({ ...base, model_type: "olmoe", num_experts: 8, num_experts_per_tok: 2, eos_token_id: [5, 50279] }, { modelId: "m", extraEosIds: [7, 5] });
  expect(c.eosTokenIds.sort()).toEqual([5, 7]);
});

test("unsupported settings are refused by name", () => {
  expect(() => parseHfConfig({ ...base, model_type: "llama" }, { modelId: "m" })).toThrow(/model_type "llama" is not supported/);
  expect(() => parseHfConfig({ ...base, model_type: "mixtral", num_local_experts: 4, num_experts_per_tok: 2, hidden_act: "gelu" }, { modelId: "m" })).toThrow(/hidden_act "gelu"/);
  expect(() => parseHfConfig({ ...base, model_type: "mixtral", num_local_experts: 4, num_experts_per_tok: 2, rope_parameters: { rope_type: "yarn", factor: 4 } }, { modelId: "m" })).toThrow(/rope type "yarn"/);
  expect(() => parseHfConfig({ ...base, model_type: "mixtral", num_experts_per_tok: 2 }, { modelId: "m" })).toThrow(/"num_local_experts" is missing/);
});
