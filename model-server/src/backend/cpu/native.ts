/**
 * The one file that loads the native CPU addon (model-server/native, built by
 * `npm run build:native` into build/Release/dispatch_cpu.node). Native addons
 * load through require() only. When the addon is not built (or fails to load)
 * this returns null and the TypeScript kernels are used; set
 * DISPATCH_MS_NATIVE=0 to force that.
 *
 * @example
 *   const k = loadNativeKernels();   // null when not built
 *   (k?.linear ?? refLinear)(x, w, out, T, K, N);
 */
import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import type * as ref from "./kernels";

/** The addon implements the reference kernels' exact signatures (kernels.ts), so either can be called. */
export interface NativeKernels {
  linear: typeof ref.linear;
  attentionSeq: typeof ref.attentionSeq;
}

const ADDON = join(import.meta.dir, "..", "..", "..", "native", "build", "Release", "dispatch_cpu.node");
let cached: NativeKernels | null | undefined;

export function loadNativeKernels(): NativeKernels | null {
  if (cached !== undefined) return cached;
  cached = null;
  if (process.env.DISPATCH_MS_NATIVE === "0" || !existsSync(ADDON)) return cached;
  try {
    const addon = createRequire(import.meta.url)(ADDON) as NativeKernels;
    if (typeof addon.linear === "function" && typeof addon.attentionSeq === "function") cached = addon;
  } catch (e) {
    process.stderr.write(`[model-server] native CPU kernels failed to load (${e instanceof Error ? e.message : e}); using TypeScript kernels\n`);
  }
  return cached;
}
