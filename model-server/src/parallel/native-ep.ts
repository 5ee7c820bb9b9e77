/**
 * The one file that loads the native-ep addon (model-server/native-ep, built by cmake-js
 * into build/Release/dispatch_ep.node): NCCL groups and GPU dispatch/combine, one rank per
 * process. NCCL and DeepEP are found at run time; on a machine without them the addon still
 * loads and says why they are unavailable.
 *
 * @example
 *   const ep = loadNativeEp();                 // null when not built
 *   ep?.ncclVersion();                         // { version: 22805, error: null } on the H200 image
 *   const g = ep!.createGroup({ uniqueId, rank, ranks: 2, device: rank, numExperts: 64, hidden: 2048, topK: 6, placement });
 *   const out = await ep!.roundTrip(g, "low-latency", x, ids, weights, scale);
 */
import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import type { EpMode } from "./expert-parallel";

export interface NativeEpGroupOptions {
  uniqueId: Uint8Array;
  rank: number;
  ranks: number;
  device: number;
  numExperts: number;
  hidden: number;
  topK: number;
  placement: number[][];
  maxTokensHt?: number;
  maxTokensLl?: number;
  align?: number;
  backend?: "nccl" | "p2p" | "deepep";
  /** The NCCL backend's low-latency wire: whole capacity regions (default) or each token once per peer. */
  llWire?: "capacity" | "tokens";
}

export interface NativeEp {
  ncclVersion(): { version: number; error: string | null };
  deepEp(): { available: boolean; error: string | null };
  uniqueId(): Uint8Array;
  createGroup(o: NativeEpGroupOptions): object;
  /** dispatch -> expert e := scale[e] * row -> combine, on the GPU; bf16 rows, fp32 out. */
  roundTrip(group: object, mode: EpMode, x: Float32Array, ids: Int32Array, weights: Float32Array, scale: Float32Array): Promise<Float32Array>;
  backendName(group: object): "nccl" | "p2p" | "deepep";
  destroyGroup(group: object): void;
}

export const NATIVE_EP_ADDON = join(import.meta.dir, "..", "..", "native-ep", "build", "Release", "dispatch_ep.node");

export function loadNativeEp(path = NATIVE_EP_ADDON): NativeEp | null {
  if (!existsSync(path)) return null;
  return createRequire(import.meta.url)(path) as NativeEp;
}
