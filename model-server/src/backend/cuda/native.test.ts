/**
 * The CUDA addon builds with nvcc (when the build is missing here; scripts/build-native.ts
 * normally builds it), loads on any machine, and without a GPU reports "no CUDA device" as an
 * ordinary, catchable error with code NO_CUDA_DEVICE.
 */
import { expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { CUDA_ADDON_PATH, loadCudaAddon } from "./native";

const ROOT = join(import.meta.dir, "..", "..", "..", "..");
const hasNvcc = Bun.which("nvcc") !== null;

test.skipIf(!hasNvcc || existsSync(CUDA_ADDON_PATH))(
  "the addon compiles with nvcc (cmake-js, sm_90a, static cudart)",
  () => {
    const cmakeJs = join(ROOT, "node_modules", "cmake-js", "bin", "cmake-js");
    const dir = join(ROOT, "model-server", "native-cuda");
    const p = Bun.spawnSync([process.execPath, cmakeJs, "compile", "--directory", dir, "--out", join(dir, "build")], {
      stdout: "pipe",
      stderr: "pipe",
      env: { ...process.env, CMAKE_BUILD_PARALLEL_LEVEL: String(navigator.hardwareConcurrency) },
    });
    if (p.exitCode !== 0) console.error(p.stdout.toString().slice(-4000), p.stderr.toString().slice(-4000));
    expect(p.exitCode).toBe(0);
    expect(existsSync(CUDA_ADDON_PATH)).toBe(true);
  },
  300_000,
);

test.skipIf(!hasNvcc && !existsSync(CUDA_ADDON_PATH))("the addon loads; without a GPU its calls throw NO_CUDA_DEVICE, catchably", () => {
  const { addon, reason } = loadCudaAddon();
  expect(reason).toBe("");
  expect(addon).not.toBeNull();
  let info: unknown = null;
  let error: (Error & { code?: string }) | null = null;
  try {
    info = addon!.deviceInfo();
  } catch (e) {
    error = e as Error & { code?: string };
  }
  if (error) {
    expect(error.code).toBe("NO_CUDA_DEVICE");
    expect(error.message).toStartWith("no CUDA device");
    expect(() => addon!.createModel({} as never)).toThrow("no CUDA device");
  } else {
    expect(info).toMatchObject({ count: expect.any(Number), name: expect.any(String) });
  }
});
