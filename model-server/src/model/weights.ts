/**
 * Checkpoint tensors -> backend weights in the layout the model computes with:
 * q/k/v fused into one [(Hq+2Hkv)*D, H] matrix, each MLP's gate and up fused
 * into [2I, H], routed experts as [E, 2I, H] + [E, H, I].
 *
 * Reads both expert layouts: per-expert tensors as published checkpoints and
 * save_pretrained write them (`mlp.experts.N.gate_proj.weight`, Mixtral's
 * `block_sparse_moe.experts.N.w1/w3/w2`), and transformers' fused in-memory
 * layout (`mlp.experts.gate_up_proj` [E, 2I, H], `mlp.experts.down_proj` [E, H, I]).
 * Every tensor's shape is checked against config.json; a missing one names itself.
 */
import type { Backend, ExpertWeights, Tensor } from "../backend/backend";
import type { Checkpoint } from "../loader/checkpoint";
import { ModelLoadError } from "../loader/errors";
import type { ModelConfig, MoeMlpConfig } from "./config";

export interface DenseWeights {
  /** [2I, H] gate rows then up rows. */
  gateUp: Tensor;
  /** [H, I] */
  down: Tensor;
}

export interface MoeWeights {
  /** [E, H] */
  router: Tensor;
  experts: ExpertWeights;
  shared?: DenseWeights;
  /** [1, H] (Qwen2-MoE) */
  sharedGate?: Tensor;
}

export interface LayerWeights {
  inputNorm: Tensor;
  postNorm: Tensor;
  /** [(Hq + 2 Hkv) D, H] */
  qkv: Tensor;
  qkvBias?: Tensor;
  /** [H, Hq D] */
  o: Tensor;
  oBias?: Tensor;
  qNorm?: Tensor;
  kNorm?: Tensor;
  mlp: { kind: "dense"; w: DenseWeights } | { kind: "moe"; w: MoeWeights };
}

export interface ModelWeights {
  embed: Tensor;
  layers: LayerWeights[];
  norm: Tensor;
  lmHead: Tensor;
  /** Checkpoint tensors the model did not use (a hint that config and weights disagree). */
  unused: string[];
}

function concat(parts: Float32Array[]): Float32Array {
  const out = new Float32Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/** `be` needs only the two memory calls, so a backend that runs whole steps natively (CUDA) can load through it too. */
export function loadWeights(cfg: ModelConfig, ckpt: Checkpoint, be: Pick<Backend, "weight" | "experts">): ModelWeights {
  const used = new Set<string>();
  const get = (name: string, shape: number[]) => {
    used.add(name);
    return ckpt.load(name, shape);
  };
  const { hidden: H, headDim: D, numHeads: Hq, numKvHeads: Hkv } = cfg;
  const vec = (name: string, n: number) => be.weight(get(name, [n]), 1, n);

  const dense = (prefix: string, I: number, names = ["gate_proj", "up_proj", "down_proj"]): DenseWeights => ({
    gateUp: be.weight(concat([get(`${prefix}.${names[0]}.weight`, [I, H]), get(`${prefix}.${names[1]}.weight`, [I, H])]), 2 * I, H),
    down: be.weight(get(`${prefix}.${names[2]}.weight`, [H, I]), H, I),
  });

  const experts = (m: string, c: MoeMlpConfig): ExpertWeights => {
    const { numExperts: E, intermediate: I } = c;
    const fused = `${m}.experts.gate_up_proj`;
    if (ckpt.has(fused)) {
      const shape = ckpt.entry(fused)!.shape;
      let gateUp = get(fused, shape);
      let down = get(`${m}.experts.down_proj`, shape[1] === 2 * I ? [E, H, I] : [E, I, H]);
      if (shape[1] !== 2 * I) {
        // [E, H, 2I] / [E, I, H] (input-major) variants: transpose to output-major.
        if (shape[1] !== H || shape[2] !== 2 * I) throw new ModelLoadError("shape_mismatch", `tensor ${fused} has shape [${shape}], expected [${E}, ${2 * I}, ${H}]`);
        gateUp = transposeExperts(gateUp, E, H, 2 * I);
        down = transposeExperts(down, E, I, H);
      } else if (shape[0] !== E || shape[2] !== H) {
        throw new ModelLoadError("shape_mismatch", `tensor ${fused} has shape [${shape}], expected [${E}, ${2 * I}, ${H}]`);
      }
      return be.experts(gateUp, down, E, I, H);
    }
    const mixtralNames = ckpt.has(`${m}.experts.0.w1.weight`);
    const [g, u, d] = mixtralNames ? ["w1", "w3", "w2"] : ["gate_proj", "up_proj", "down_proj"];
    const gateUp = new Float32Array(E * 2 * I * H);
    const down = new Float32Array(E * H * I);
    for (let e = 0; e < E; e++) {
      gateUp.set(get(`${m}.experts.${e}.${g}.weight`, [I, H]), e * 2 * I * H);
      gateUp.set(get(`${m}.experts.${e}.${u}.weight`, [I, H]), e * 2 * I * H + I * H);
      down.set(get(`${m}.experts.${e}.${d}.weight`, [H, I]), e * H * I);
    }
    return be.experts(gateUp, down, E, I, H);
  };

  const layers: LayerWeights[] = [];
  for (let i = 0; i < cfg.numLayers; i++) {
    const p = `model.layers.${i}`;
    const a = `${p}.self_attn`;
    const layerCfg = cfg.layers[i]!;
    const qkv = be.weight(concat([get(`${a}.q_proj.weight`, [Hq * D, H]), get(`${a}.k_proj.weight`, [Hkv * D, H]), get(`${a}.v_proj.weight`, [Hkv * D, H])]), (Hq + 2 * Hkv) * D, H);
    const qkvBias = cfg.qkvBias
      ? be.weight(concat([get(`${a}.q_proj.bias`, [Hq * D]), get(`${a}.k_proj.bias`, [Hkv * D]), get(`${a}.v_proj.bias`, [Hkv * D])]), 1, (Hq + 2 * Hkv) * D)
      : undefined;
    const layer: LayerWeights = {
      inputNorm: vec(`${p}.input_layernorm.weight`, H),
      postNorm: vec(`${p}.post_attention_layernorm.weight`, H),
      qkv,
      qkvBias,
      o: be.weight(get(`${a}.o_proj.weight`, [H, Hq * D]), H, Hq * D),
      oBias: cfg.oBias ? vec(`${a}.o_proj.bias`, H) : undefined,
      qNorm: cfg.qkNorm === "head" ? vec(`${a}.q_norm.weight`, D) : cfg.qkNorm === "full" ? vec(`${a}.q_norm.weight`, Hq * D) : undefined,
      kNorm: cfg.qkNorm === "head" ? vec(`${a}.k_norm.weight`, D) : cfg.qkNorm === "full" ? vec(`${a}.k_norm.weight`, Hkv * D) : undefined,
      mlp: { kind: "dense", w: undefined as unknown as DenseWeights },
    };
    if (layerCfg.kind === "dense") {
      layer.mlp = { kind: "dense", w: dense(`${p}.mlp`, layerCfg.intermediate) };
    } else {
      const m = ckpt.has(`${p}.block_sparse_moe.gate.weight`) ? `${p}.block_sparse_moe` : `${p}.mlp`;
      const w: MoeWeights = {
        router: be.weight(get(`${m}.gate.weight`, [layerCfg.numExperts, H]), layerCfg.numExperts, H),
        experts: experts(m, layerCfg),
      };
      if (layerCfg.sharedIntermediate > 0) {
        const sharedName = cfg.architecture === "deepseek_moe" ? `${m}.shared_experts` : `${m}.shared_expert`;
        w.shared = dense(sharedName, layerCfg.sharedIntermediate);
        if (layerCfg.sharedGate) w.sharedGate = be.weight(get(`${m}.shared_expert_gate.weight`, [1, H]), 1, H);
      }
      layer.mlp = { kind: "moe", w };
    }
    layers.push(layer);
  }
  const embed = be.weight(get("model.embed_tokens.weight", [cfg.vocabSize, H]), cfg.vocabSize, H);
  const norm = vec("model.norm.weight", H);
  const lmHead = cfg.tieEmbeddings && !ckpt.has("lm_head.weight") ? embed : be.weight(get("lm_head.weight", [cfg.vocabSize, H]), cfg.vocabSize, H);
  return { embed, layers, norm, lmHead, unused: ckpt.names().filter((n) => !used.has(n)) };
}

/** [E, R, C] -> [E, C, R] */
function transposeExperts(src: Float32Array, E: number, R: number, C: number): Float32Array {
  const out = new Float32Array(src.length);
  for (let e = 0; e < E; e++) {
    const o = e * R * C;
    for (let r = 0; r < R; r++) for (let c = 0; c < C; c++) out[o + c * R + r] = src[o + r * C + c]!;
  }
  return out;
}
