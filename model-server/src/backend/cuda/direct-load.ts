/**
 * Loading a checkpoint straight to the GPU: the same loadWeights() walk (model/weights.ts) over a
 * checkpoint proxy whose load() checks the tensor (present, shape as config.json says), records
 * its file byte range and returns an empty array. The sink then hands the ranges recorded since
 * its last call to the addon (uploadRanges), which reads them into pinned memory and copies them
 * to consecutive offsets of one device tensor, converting dtype on the way (bf16 matrices,
 * fp32 vectors and routers). No value passes through JavaScript.
 *
 * This relies on loadWeights() reading each weight's parts right before handing the weight to
 * the sink, in layout order (q, k, v; gate, up; per expert gate, up, down), as it does.
 * Checkpoints whose fused experts are stored input-major ([E, H, 2I]) need a transpose: they
 * take the fp32 path (canLoadDirect() says which).
 *
 * @example
 *   const { ckpt: proxy, sink } = createDirectLoad(openCheckpoint(dir), addon, model);
 *   const w = loadWeights(config, proxy, sink);
 *   addon.bind(model, toNativeWeights(w, sink));
 */
import type { ExpertWeights, Tensor } from "../backend";
import type { Checkpoint } from "../../loader/checkpoint";
import { ModelLoadError } from "../../loader/errors";
import type { TensorEntry } from "../../loader/safetensors";
import type { ModelConfig } from "../../model/config";
import { CudaExperts, CudaWeight, type CudaWeightSink } from "./cuda-weights";
import type { CudaAddon, ModelHandle } from "./native";

const DTYPE: Record<string, number> = { F32: 0, F16: 1, BF16: 2 };
const ROUTER_MAX_ROWS = 1024;

/** False when some fused expert tensor is stored input-major (needs a transpose: fp32 path). */
export function canLoadDirect(config: ModelConfig, ckpt: Checkpoint): boolean {
  for (const name of ckpt.names()) {
    if (!name.endsWith(".experts.gate_up_proj")) continue;
    const layer = Number(/layers\.(\d+)\./.exec(name)?.[1]);
    const l = config.layers[layer];
    if (l?.kind === "moe" && ckpt.entry(name)!.shape[1] !== 2 * l.intermediate) return false;
  }
  return true;
}

export function createDirectLoad(ckpt: Checkpoint, addon: CudaAddon, model: ModelHandle): { ckpt: Checkpoint; sink: CudaWeightSink } {
  let pending: TensorEntry[] = [];
  const proxy: Checkpoint = {
    dir: ckpt.dir,
    files: ckpt.files,
    totalBytes: ckpt.totalBytes,
    names: () => ckpt.names(),
    has: (n) => ckpt.has(n),
    entry: (n) => ckpt.entry(n),
    load(name, shape) {
      const e = ckpt.entry(name);
      if (!e) throw new ModelLoadError("missing_tensor", `missing tensor ${name} in ${ckpt.dir}`);
      if (shape && (e.shape.length !== shape.length || e.shape.some((d, i) => d !== shape[i]))) {
        throw new ModelLoadError("shape_mismatch", `tensor ${name} has shape [${e.shape}], expected [${shape}] (from config.json)`);
      }
      if (DTYPE[e.dtype] === undefined) throw new ModelLoadError("unsupported_dtype", `tensor ${name} in ${e.file} has dtype ${e.dtype}; supported: F32, F16, BF16`);
      pending.push(e);
      proxy.onRead?.(e.end - e.begin);
      return new Float32Array(0);
    },
  };
  const take = () => {
    const parts = pending;
    pending = [];
    return parts;
  };
  const upload = (parts: TensorEntry[], n: number, asBf16: boolean) => {
    const ranges = new Float64Array(parts.length * 4);
    parts.forEach((e, i) => ranges.set([ckpt.files.indexOf(e.file), e.begin, e.end, DTYPE[e.dtype]!], i * 4));
    return addon.uploadRanges(model, ckpt.files, ranges, n, asBf16);
  };
  const count = (parts: TensorEntry[]) => parts.reduce((n, e) => n + e.shape.reduce((a, b) => a * b, 1), 0);
  const check = (parts: TensorEntry[], n: number, what: string) => {
    if (count(parts) !== n) throw new ModelLoadError("shape_mismatch", `${what}: tensors ${parts.map((e) => e.name).join(", ")} hold ${count(parts)} values, expected ${n}`);
  };

  const sink: CudaWeightSink = {
    weight(_data, rows, cols) {
      const parts = take();
      check(parts, rows * cols, `[${rows}, ${cols}] weight`);
      if (rows === 1) return new CudaWeight(rows, cols, upload(parts, rows * cols, false), undefined);
      const w = new CudaWeight(rows, cols, upload(parts, rows * cols, true), undefined);
      if (rows <= ROUTER_MAX_ROWS) w.fp32Id = upload(parts, rows * cols, false);
      return w;
    },
    experts(_gateUp, _down, E, I, H): ExpertWeights {
      const parts = take();
      let gateUp: TensorEntry[];
      let down: TensorEntry[];
      if (parts.length === 2) {
        [gateUp, down] = [[parts[0]!], [parts[1]!]]; // fused [E, 2I, H] + [E, H, I]
      } else if (parts.length === 3 * E) {
        // per expert: gate, up, down
        gateUp = parts.filter((_, i) => i % 3 !== 2);
        down = parts.filter((_, i) => i % 3 === 2);
      } else {
        throw new ModelLoadError("bad_file", `experts: ${parts.length} tensors read for ${E} experts`);
      }
      check(gateUp, E * 2 * I * H, "experts gate/up");
      check(down, E * H * I, "experts down");
      return new CudaExperts(E, H, I, upload(gateUp, E * 2 * I * H, true), upload(down, E * H * I, true));
    },
    fp32(t: Tensor) {
      const w = t as CudaWeight;
      if (w.fp32Id === undefined) throw new Error(`no fp32 copy of a [${w.rows}, ${w.cols}] weight`);
      return w.fp32Id;
    },
    release() {},
  };
  return { ckpt: proxy, sink };
}
