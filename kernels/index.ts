/**
 * The one facade over dispatch's native MoE kernels (kernels/build/addon/Release/dispatch_kernels.node).
 *
 * `cpu` holds the C++ references (run anywhere); `gpu` enqueues CUDA kernels on a stream and
 * returns at once; `download` / `synchronize` wait in a worker thread and return Promises.
 * bf16 tensors travel as Uint16Array bit patterns; device pointers and streams as bigint.
 *
 * @example
 * import { loadKernels } from "@dispatch/kernels";
 * const k = loadKernels();
 * const { ids, weights } = k.cpu.routerTopk(logits, T, { numExperts: 64, topK: 8 });
 * if (k.gpuAvailable()) k.requireGpu().sm90_bf16_grouped_gemm_masked({ ... });
 */
import { createRequire } from "node:module";
import { existsSync } from "node:fs";
import { join } from "node:path";

export type Ptr = bigint;

export interface RouterOptions {
  numExperts: number;
  topK: number;
  scoring?: "softmax" | "sigmoid";
  renormalize?: boolean;
  numGroups?: number;
  topkGroups?: number;
  scale?: number;
  bias?: Float32Array;
}

export interface CpuKernels {
  groupedGemmBf16(x: Uint16Array, w: Uint16Array, offsets: Int32Array, E: number, N: number, K: number): Uint16Array;
  groupedGemmW8a16(x: Uint16Array, q: Int8Array, scales: Float32Array, offsets: Int32Array, E: number, N: number,
    K: number): Uint16Array;
  routerTopk(logits: Float32Array, T: number, opts: RouterOptions): { ids: Int32Array; weights: Float32Array };
  moeAlign(ids: Int32Array, E: number, cap: number): { counts: Int32Array; offsets: Int32Array; slotRow: Int32Array };
  moePermute(x: Uint16Array, slotRow: Int32Array, T: number, k: number, H: number, rows: number): Uint16Array;
  moeUnpermute(y: Uint16Array, slotRow: Int32Array, weights: Float32Array, T: number, k: number, H: number): Uint16Array;
  siluMul(h: Uint16Array, rows: number, I: number): Uint16Array;
  quantizeInt8Rows(w: Uint16Array, rows: number, K: number): { q: Int8Array; scales: Float32Array };
}

interface Rows { offsets?: Ptr; counts?: Ptr; cap?: number }
/** fuseSilu: y = silu(gate) * up [rows, N/2]; needs W from interleave_gate_up. */
interface Fuse { fuseSilu?: boolean | number }
type Launch<T> = (args: T & { stream: Ptr }) => void;

export interface GpuKernels {
  available(): boolean;
  malloc(bytes: number): Ptr;
  free(ptr: Ptr): void;
  streamCreate(): Ptr;
  streamDestroy(stream: Ptr): void;
  upload(dst: Ptr, src: ArrayBufferView, stream: Ptr): void;
  download(dst: ArrayBufferView, src: Ptr, stream: Ptr): Promise<void>;
  synchronize(stream: Ptr): Promise<void>;
  sm90_bf16_grouped_gemm_masked: Launch<Rows & Fuse & { x: Ptr; w: Ptr; y: Ptr; E: number; N: number; K: number;
    maxRows: number; maxActive?: number }>;
  sm90_w8a16_grouped_gemm_masked: Launch<Rows & Fuse & { x: Ptr; w: Ptr; scales: Ptr; y: Ptr; E: number; N: number;
    K: number; maxRows: number; maxActive?: number }>;
  sm90_bf16_grouped_gemm_contiguous: Launch<Fuse & { x: Ptr; w: Ptr; y: Ptr; offsets: Ptr; M: number; E: number; N: number;
    K: number }>;
  /** Picks the small-M, swap-AB or wgmma path from T and the shape alone (graph-safe per batch size; see
   * Kernels.paths.moeBf16Path). */
  moe_grouped_gemm_bf16: Launch<Fuse & { x: Ptr; w: Ptr; y: Ptr; offsets: Ptr; M: number; T: number; E: number; N: number;
    K: number }>;
  /** Gate/up rows interleaved by 8 for fuseSilu (elemBytes 2 bf16, 1 int8; scales: 4 with K = 1). */
  interleave_gate_up: Launch<{ src: Ptr; dst: Ptr; E: number; I: number; K: number; elemBytes: number }>;
  sm90_f32_router_topk: Launch<Omit<RouterOptions, "bias"> & { logits: Ptr; bias?: Ptr; T: number; ids: Ptr;
    weights: Ptr }>;
  sm90_i32_moe_align: Launch<{ ids: Ptr; M: number; E: number; cap?: number; counts: Ptr; offsets?: Ptr;
    slotRow: Ptr }>;
  sm90_bf16_moe_permute: Launch<{ x: Ptr; slotRow: Ptr; T: number; k: number; H: number; xp: Ptr }>;
  sm90_bf16_moe_unpermute: Launch<{ y: Ptr; slotRow: Ptr; weights: Ptr; T: number; k: number; H: number; out: Ptr }>;
  sm90_bf16_silu_mul: Launch<{ h: Ptr; rows: number; I: number; act: Ptr }>;
  quantizeInt8Streaming(w: Uint16Array, E: number, N: number, K: number, q: Ptr, scales: Ptr, stream: Ptr):
    Promise<void>;
}

/** Which kernel a launch takes: pure host logic, callable without a GPU. */
export interface KernelPaths {
  /** moe_grouped_gemm_bf16's choice for T tokens, M = T * top-k rows, E experts, an N x K projection, on a GPU
   * with `sms` multiprocessors (aligned: X and W 16-byte aligned, default true; swapab: false = DK_BF16_SWAPAB=0).
   * tokenTile is the swap-AB kernel's token tile (0 on the other paths). */
  moeBf16Path(o: { T: number; M: number; E: number; N: number; K: number; sms: number; aligned?: boolean;
    swapab?: boolean }): { path: "small_m" | "swapab" | "contiguous"; tokenTile: number };
  /** The W8A16 tensor-core GEMM's token tile for a rows-per-expert hint and its CTAs per SM for M rows, E experts
   * and N outputs on `sms` multiprocessors (without the DK_W8A16_* overrides). */
  w8a16Launch(o: { rowsHint: number; M: number; E: number; N: number; sms: number }): { tokenTile: number;
    ctasPerSm: number };
  /** Both swap-AB kernels (bf16, int8: true for the W8A16 kernel's 128-wide k blocks): the bound on their work
   * items for a token tile, M rows, E experts and N outputs, and the cluster size that splits K over `sms`
   * multiprocessors (1: no split; tiles above 16 never split; without DK_SWAPAB_SPLIT_K). */
  swapabSplit(o: { tokenTile: number; M: number; E: number; N: number; K: number; sms: number; int8?: boolean }): {
    items: number; split: number };
}

export interface Kernels {
  cpu: CpuKernels;
  paths: KernelPaths;
  /** True when a CUDA device is usable from this process. */
  gpuAvailable(): boolean;
  /** The GPU kernels; throws a clear error (code DK_NO_GPU) when no GPU is present. */
  requireGpu(): GpuKernels;
}

export class KernelsError extends Error {
  constructor(message: string, readonly code: "DK_NOT_BUILT" | "DK_NO_GPU") {
    super(message);
    this.name = "KernelsError";
  }
}

export const ADDON_PATH = join(import.meta.dir ?? __dirname, "build", "addon", "Release", "dispatch_kernels.node");

let cached: Kernels | undefined;

/** Loads the addon once (native addons load with require(), never import). */
export function loadKernels(path: string = ADDON_PATH): Kernels {
  if (cached) return cached;
  if (!existsSync(path)) {
    throw new KernelsError(`dispatch kernels addon not built at ${path}: run \`bun run build\` in kernels/`,
      "DK_NOT_BUILT");
  }
  const addon = createRequire(import.meta.url)(path) as { cpu: CpuKernels; gpu: GpuKernels; paths: KernelPaths };
  let gpuOk: boolean | undefined;
  const gpuAvailable = () => (gpuOk ??= addon.gpu.available());
  cached = {
    cpu: addon.cpu,
    paths: addon.paths,
    gpuAvailable,
    requireGpu() {
      if (!gpuAvailable()) {
        throw new KernelsError("no CUDA GPU is available to dispatch's kernels (use the CPU backend)", "DK_NO_GPU");
      }
      return addon.gpu;
    },
  };
  return cached;
}
