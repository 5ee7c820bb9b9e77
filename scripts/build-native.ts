/**
 * Builds the native addons (cmake-js, offline) when their output is missing or
 * older than their sources. Each addon folder has a CMakeLists.txt; a folder
 * without one is not an addon yet and is skipped.
 *
 *   bun scripts/build-native.ts          # build what is stale
 *   bun scripts/build-native.ts --force  # rebuild everything
 */
import { existsSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";

interface Addon {
  dir: string;
  /** cmake-js's build folder, relative to dir (the addon's facade loads from it). */
  buildDir: string;
  /** The .node file the build produces, relative to dir. */
  output: string;
  /** Extra cmake-js arguments. */
  cmakeArgs?: string[];
  /** Only built when this command exists (e.g. nvcc for CUDA). */
  requires?: string;
}

const root = join(import.meta.dir, "..");
const addons: Addon[] = [
  { dir: "model-server/native", buildDir: "build", output: "build/Release/dispatch_cpu.node" },
  { dir: "kernels", buildDir: "build/addon", output: "build/addon/Release/dispatch_kernels.node", requires: "nvcc" },
  { dir: "model-server/native-cuda", buildDir: "build", output: "build/Release/dispatch_cuda.node", requires: "nvcc" },
  { dir: "model-server/native-ep", buildDir: "build", output: "build/Release/dispatch_ep.node", requires: "nvcc" },
];

function newestSource(dir: string): number {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (entry.name === "build" || entry.name === "node_modules" || entry.name.startsWith(".")) continue;
    const p = join(dir, entry.name);
    if (entry.isDirectory()) newest = Math.max(newest, newestSource(p));
    else if (/\.(c|cc|cpp|h|hpp|cu|cuh|txt|cmake)$/.test(entry.name)) newest = Math.max(newest, statSync(p).mtimeMs);
  }
  return newest;
}

const force = process.argv.includes("--force");
let failed = false;
for (const addon of addons) {
  const dir = join(root, addon.dir);
  if (!existsSync(join(dir, "CMakeLists.txt"))) continue;
  if (addon.requires && !Bun.which(addon.requires)) {
    console.error(`[build-native] skipping ${addon.dir}: ${addon.requires} not found`);
    continue;
  }
  const out = join(dir, addon.output);
  if (!force && existsSync(out) && statSync(out).mtimeMs >= newestSource(dir)) continue;
  console.error(`[build-native] building ${addon.dir} ...`);
  const t0 = performance.now();
  const cmakeJs = join(root, "node_modules", "cmake-js", "bin", "cmake-js");
  const proc = Bun.spawnSync([process.execPath, cmakeJs, "compile", "--directory", dir, "--out", join(dir, addon.buildDir), ...(addon.cmakeArgs ?? [])], {
    stdout: "inherit",
    stderr: "inherit",
    env: { ...process.env, CMAKE_BUILD_PARALLEL_LEVEL: String(navigator.hardwareConcurrency) },
  });
  if (proc.exitCode !== 0) {
    console.error(`[build-native] ${addon.dir} failed (exit ${proc.exitCode})`);
    failed = true;
  } else {
    console.error(`[build-native] ${addon.dir} built in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  }
}
process.exit(failed ? 1 : 0);
