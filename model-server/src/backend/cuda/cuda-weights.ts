/**
 * Weights for the CUDA backend, loaded through the same loader as the CPU backend
 * (model/weights.ts loadWeights calls weight() and experts() here). Each tensor goes to the GPU
 * as it is read: matrices as bf16, vectors (norms, biases, Qwen2-MoE's shared gate) as fp32.
 * Routers are matrices the loader does not name, so small matrices keep their host copy until
 * toNativeWeights() uploads the routers in fp32 (routing in fp32 keeps near-ties as the
 * reference breaks them) and drops the rest.
 *
 * @example
 *   const sink = createCudaWeightSink(addon, model);
 *   const w = loadWeights(config, ckpt, sink);
 *   addon.bind(model, toNativeWeights(w, sink));
 */
import type { ExpertWeights, Tensor } from "../backend";
import type { LayerWeights, ModelWeights } from "../../model/weights";
import type { CudaAddon, ModelHandle, NativeLayerWeights, NativeModelWeights } from "./native";

/** Matrices up to this many rows keep a host copy until binding (routers: E rows). */
const ROUTER_MAX_ROWS = 1024;

export class CudaWeight implements Tensor {
  constructor(
    readonly rows: number,
    readonly cols: number,
    /** Device buffer id (bf16 for matrices, fp32 for vectors). */
    readonly id: number,
    public host: Float32Array | undefined,
    /** fp32 copy on the device, when one was uploaded at load (direct loading: routers). */
    public fp32Id?: number,
  ) {}
}

export class CudaExperts implements ExpertWeights {
  constructor(
    readonly numExperts: number,
    readonly hidden: number,
    readonly intermediate: number,
    /** bf16 [E, 2I, H] */
    readonly gateUp: number,
    /** bf16 [E, H, I] */
    readonly down: number,
  ) {}
}

export interface CudaWeightSink {
  weight(data: Float32Array, rows: number, cols: number): Tensor;
  experts(gateUp: Float32Array, down: Float32Array, numExperts: number, intermediate: number, hidden: number): ExpertWeights;
  /** fp32 copy of a matrix that kept its host data (routers). */
  fp32(t: Tensor): number;
  /** Drop every host copy still held. */
  release(): void;
}

export function createCudaWeightSink(addon: CudaAddon, model: ModelHandle): CudaWeightSink {
  const held: CudaWeight[] = [];
  return {
    weight(data, rows, cols) {
      if (data.length !== rows * cols) throw new RangeError(`weight of ${data.length} values is not [${rows}, ${cols}]`);
      if (rows === 1) return new CudaWeight(rows, cols, addon.upload(model, data, false), undefined);
      const w = new CudaWeight(rows, cols, addon.upload(model, data, true), rows <= ROUTER_MAX_ROWS ? data : undefined);
      if (w.host) held.push(w);
      return w;
    },
    experts(gateUp, down, E, I, H) {
      return new CudaExperts(E, H, I, addon.upload(model, gateUp, true), addon.upload(model, down, true));
    },
    fp32(t) {
      const w = t as CudaWeight;
      if (w.fp32Id !== undefined) return w.fp32Id;
      if (!w.host) throw new Error(`no host copy of a [${w.rows}, ${w.cols}] weight to upload in fp32`);
      return addon.upload(model, w.host, false);
    },
    release() {
      for (const w of held) w.host = undefined;
      held.length = 0;
    },
  };
}

const id = (t: Tensor | undefined) => (t ? (t as CudaWeight).id : -1);

function layerIds(l: LayerWeights, sink: CudaWeightSink): NativeLayerWeights {
  const base = { inputNorm: id(l.inputNorm), postNorm: id(l.postNorm), qkv: id(l.qkv), qkvBias: id(l.qkvBias), o: id(l.o), oBias: id(l.oBias), qNorm: id(l.qNorm), kNorm: id(l.kNorm) };
  if (l.mlp.kind === "dense") return { ...base, gateUp: id(l.mlp.w.gateUp), down: id(l.mlp.w.down) };
  const m = l.mlp.w;
  const ex = m.experts as CudaExperts;
  return {
    ...base,
    gateUp: ex.gateUp,
    down: ex.down,
    router: sink.fp32(m.router),
    sharedGateUp: id(m.shared?.gateUp),
    sharedDown: id(m.shared?.down),
    sharedGate: id(m.sharedGate),
  };
}

/** Loader output -> the addon's weight ids (uploads routers in fp32, then drops host copies). */
export function toNativeWeights(w: ModelWeights, sink: CudaWeightSink): NativeModelWeights {
  const out = { embed: id(w.embed), norm: id(w.norm), lmHead: id(w.lmHead), layers: w.layers.map((l) => layerIds(l, sink)) };
  sink.release();
  return out;
}
