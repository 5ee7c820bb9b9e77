/**
 * A Hugging Face checkpoint directory's tensors: one `model.safetensors`, or
 * shards listed by `model.safetensors.index.json` (its weight_map), or, lacking
 * both, every `*.safetensors` file in the directory. Tensors are read one at a
 * time (streamed), converted to fp32, and checked against the shape the model
 * expects; a missing or mismatched tensor is a ModelLoadError naming it.
 *
 * @example
 *   const ckpt = openCheckpoint("model-server/models/tiny-wordnet-moe");
 *   const emb = ckpt.load("model.embed_tokens.weight", [4096, 256]);
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { ModelLoadError } from "./errors";
import { readSafetensorsHeader, readTensorF32, type TensorEntry } from "./safetensors";

export interface Checkpoint {
  readonly dir: string;
  readonly files: string[];
  /** Sum of all tensors' stored bytes (for progress). */
  readonly totalBytes: number;
  names(): string[];
  has(name: string): boolean;
  entry(name: string): TensorEntry | undefined;
  /** fp32 data; `shape` is checked when given. Calls onRead with the bytes read. */
  load(name: string, shape?: number[]): Float32Array;
  onRead?: (bytes: number) => void;
}

export function openCheckpoint(dir: string): Checkpoint {
  const files = checkpointFiles(dir);
  const entries = new Map<string, TensorEntry>();
  for (const f of files) {
    for (const [name, e] of Object.entries(readSafetensorsHeader(f).tensors)) {
      if (entries.has(name)) throw new ModelLoadError("bad_file", `tensor ${name} appears in both ${entries.get(name)!.file} and ${f}`);
      entries.set(name, e);
    }
  }
  let totalBytes = 0;
  for (const e of entries.values()) totalBytes += e.end - e.begin;
  const ckpt: Checkpoint = {
    dir,
    files,
    totalBytes,
    names: () => [...entries.keys()],
    has: (name) => entries.has(name),
    entry: (name) => entries.get(name),
    load(name, shape) {
      const e = entries.get(name);
      if (!e) throw new ModelLoadError("missing_tensor", `missing tensor ${name} in ${dir}`);
      if (shape && (e.shape.length !== shape.length || e.shape.some((d, i) => d !== shape[i]))) {
        throw new ModelLoadError("shape_mismatch", `tensor ${name} has shape [${e.shape}], expected [${shape}] (from config.json)`);
      }
      const data = readTensorF32(e);
      ckpt.onRead?.(e.end - e.begin);
      return data;
    },
  };
  return ckpt;
}

function checkpointFiles(dir: string): string[] {
  if (!existsSync(dir)) throw new ModelLoadError("missing_file", `model directory ${dir} does not exist`);
  const index = join(dir, "model.safetensors.index.json");
  if (existsSync(index)) {
    let map: Record<string, string>;
    try {
      map = JSON.parse(readFileSync(index, "utf8")).weight_map;
    } catch {
      throw new ModelLoadError("bad_file", `${index} is not valid JSON`);
    }
    if (!map || typeof map !== "object") throw new ModelLoadError("bad_file", `${index} has no weight_map`);
    const shards = [...new Set(Object.values(map))].sort();
    for (const s of shards) if (!existsSync(join(dir, s))) throw new ModelLoadError("missing_file", `shard ${s} listed in ${index} is missing`);
    return shards.map((s) => join(dir, s));
  }
  const single = join(dir, "model.safetensors");
  if (existsSync(single)) return [single];
  const any = readdirSync(dir).filter((f) => f.endsWith(".safetensors")).sort();
  if (any.length === 0) throw new ModelLoadError("missing_file", `no model.safetensors, index or *.safetensors in ${dir}`);
  return any.map((f) => join(dir, f));
}
