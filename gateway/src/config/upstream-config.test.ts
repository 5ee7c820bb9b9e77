import { expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadConfig } from "./load-config";

test("upstream.connect_timeout_ms: 3000 by default, from YAML or DISPATCH_UPSTREAM_CONNECT_TIMEOUT_MS, 0 allowed, bad values refused", () => {
  expect(loadConfig({ argv: [], env: {} }).config.upstream.connect_timeout_ms).toBe(3000);
  expect(loadConfig({ argv: [], env: { DISPATCH_UPSTREAM_CONNECT_TIMEOUT_MS: "0" } }).config.upstream.connect_timeout_ms).toBe(0);
  const dir = mkdtempSync(join(tmpdir(), "dispatch-upstream-"));
  try {
    const p = join(dir, "a.yaml");
    writeFileSync(p, "upstream:\n  connect_timeout_ms: 750\n");
    expect(loadConfig({ argv: ["--config", p], env: {} }).config.upstream.connect_timeout_ms).toBe(750);
    expect(loadConfig({ argv: ["--config", p], env: { DISPATCH_UPSTREAM_CONNECT_TIMEOUT_MS: "1200" } }).config.upstream.connect_timeout_ms).toBe(1200);
    writeFileSync(p, "upstream:\n  connect_timeout_ms: 3s\n");
    expect(() => loadConfig({ argv: ["--config", p], env: {} })).toThrow('config.upstream.connect_timeout_ms must be an integer in 0..600000, got "3s"');
    writeFileSync(p, "upstream:\n  connect_timeout: 100\n");
    expect(() => loadConfig({ argv: ["--config", p], env: {} })).toThrow("config.upstream.connect_timeout is not a known key (known: connect_timeout_ms)");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  expect(() => loadConfig({ argv: [], env: { DISPATCH_UPSTREAM_CONNECT_TIMEOUT_MS: "-1" } })).toThrow(
    "DISPATCH_UPSTREAM_CONNECT_TIMEOUT_MS: config.upstream.connect_timeout_ms must be an integer in 0..600000, got \"-1\"",
  );
  expect(() => loadConfig({ argv: [], env: { DISPATCH_UPSTREAM_CONNECT_TIMEOUT_MS: "700000" } })).toThrow(/must be an integer in 0\.\.600000/);
});
