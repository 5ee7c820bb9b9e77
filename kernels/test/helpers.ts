// Test helpers: bf16 conversion, seeded random data, relative error, and building the addon once.
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { ADDON_PATH } from "../index";

export const KERNELS_DIR = join(import.meta.dir, "..");

/** Builds the addon with cmake-js if it is missing (CI: about 15 s on 2 cores). */
export function ensureAddon(): void {
  if (existsSync(ADDON_PATH)) return;
  const bin = join(KERNELS_DIR, "..", "node_modules", ".bin");
  const r = spawnSync("cmake-js", ["compile", "--out", "build/addon", "-p", "2"], {
    cwd: KERNELS_DIR, encoding: "utf8", env: { ...process.env, PATH: `${bin}:${process.env.PATH}` },
  });
  if (r.status !== 0) throw new Error(`addon build failed:\n${r.stdout}\n${r.stderr}`);
}

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);
export function bf16ToF32(v: number): number {
  u32[0] = v << 16;
  return f32[0]!;
}
export function f32ToBf16(x: number): number {
  f32[0] = x;
  const u = u32[0]!;
  return ((u + 0x7fff + ((u >>> 16) & 1)) >>> 16) & 0xffff;
}

/** Deterministic normal-ish values (mulberry32 + Box-Muller). */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  const uni = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return () => Math.sqrt(-2 * Math.log(uni() + 1e-12)) * Math.cos(2 * Math.PI * uni());
}

export function randBf16(n: number, r: () => number, scale = 1): Uint16Array {
  const out = new Uint16Array(n);
  for (let i = 0; i < n; i++) out[i] = f32ToBf16(r() * scale);
  return out;
}

export function relErr(got: ArrayLike<number>, ref: ArrayLike<number>, conv: (v: number) => number = (v) => v): number {
  let num = 0, den = 0;
  for (let i = 0; i < ref.length; i++) {
    const rv = ref[i]!;
    const d = conv(got[i]!) - rv;
    num += d * d;
    den += rv * rv;
  }
  return Math.sqrt(num / Math.max(den, 1e-30));
}
