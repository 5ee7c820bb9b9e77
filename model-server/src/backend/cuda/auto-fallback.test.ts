/**
 * The real server process with `--backend auto` on a machine without a usable GPU: one log line
 * says why CUDA is not used, and the server comes up on the CPU backend.
 */
import { expect, test } from "bun:test";
import { join } from "node:path";
import { probeCuda } from "./native";

const ROOT = join(import.meta.dir, "..", "..", "..", "..");

test.skipIf(probeCuda().ok)("--backend auto falls back to the CPU backend with a clear log line", async () => {
  const proc = Bun.spawn([process.execPath, join(ROOT, "model-server", "src", "main.ts"), "--model", join(ROOT, "model-server", "models", "tiny-wordnet-moe"), "--port", "0", "--backend", "auto"], {
    stdout: "pipe",
    stderr: "pipe",
  });
  try {
    const decoder = new TextDecoder();
    let out = "";
    const until = Date.now() + 20_000;
    const reader = proc.stdout.getReader();
    while (!out.includes("ready:") && Date.now() < until) {
      const r = await Promise.race([reader.read(), Bun.sleep(until - Date.now()).then(() => ({ done: true, value: undefined }))]);
      if (r.done) break;
      out += decoder.decode(r.value, { stream: true });
    }
    reader.releaseLock();
    expect(out).toContain("[model-server] ready:");
    proc.kill("SIGTERM");
    const err = await new Response(proc.stderr).text();
    expect(err).toContain("[model-server] backend auto: CUDA unavailable (");
    expect(err).toContain("falling back to the CPU backend");
    expect(err).toMatch(/backend cpu/);
  } finally {
    if (proc.exitCode === null) proc.kill("SIGKILL");
  }
}, 30_000);
