import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { envTable, loadConfig } from "./load-config";
import { ConfigError } from "./schema";

const dir = mkdtempSync(join(tmpdir(), "dispatch-config-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const file = (name: string, text: string) => {
  const p = join(dir, name);
  writeFileSync(p, text);
  return p;
};

test("defaults: 127.0.0.1:8080, least-outstanding, no backends", () => {
  const { config } = loadConfig({ argv: [], env: {} });
  expect(config.server).toMatchObject({ host: "127.0.0.1", port: 8080 });
  expect(config.routing.policy).toBe("dispatch");
  expect(config.backends).toEqual([]);
});

test("YAML < PORT < DISPATCH_* < command line", () => {
  const p = file("a.yaml", "server:\n  port: 9001\nrouting:\n  policy: round-robin\nbackends:\n  - kind: openai\n    url: http://127.0.0.1:8000/v1/\n    models: [m]\n");
  let c = loadConfig({ argv: ["--config", p], env: {} }).config;
  expect(c.server.port).toBe(9001);
  expect(c.backends).toEqual([{ id: "openai-0", kind: "openai", url: "http://127.0.0.1:8000/v1", protocol: "connect", models: ["m"], api_key: "", metrics_url: "" }]);
  c = loadConfig({ argv: ["--config", p], env: { PORT: "9002" } }).config;
  expect(c.server.port).toBe(9002);
  c = loadConfig({ argv: ["--config", p], env: { PORT: "9002", DISPATCH_SERVER_PORT: "9003", DISPATCH_LOGGING_LOG_PROMPTS: "true" } }).config;
  expect(c.server.port).toBe(9003);
  expect(c.logging.log_prompts).toBe(true);
  c = loadConfig({ argv: ["--config", p, "--port", "9004"], env: { DISPATCH_SERVER_PORT: "9003" } }).config;
  expect(c.server.port).toBe(9004);
});

test("DISPATCH_BACKENDS and --backend", () => {
  const c = loadConfig({ argv: [], env: { DISPATCH_BACKENDS: "dispatch=http://127.0.0.1:9000, openai=http://127.0.0.1:8000/v1,http://127.0.0.1:9001" } }).config;
  expect(c.backends.map((b) => [b.kind, b.url])).toEqual([
    ["dispatch", "http://127.0.0.1:9000"],
    ["openai", "http://127.0.0.1:8000/v1"],
    ["dispatch", "http://127.0.0.1:9001"],
  ]);
  expect(loadConfig({ argv: ["--backend", "openai=http://h:1/v1"], env: {} }).config.backends[0]!.kind).toBe("openai");
});

test("unknown keys and bad values are refused with the key's name", () => {
  const cases: [string, RegExp][] = [
    ["servr:\n  port: 1\n", /config\.servr is not a known section/],
    ["server:\n  prot: 1\n", /config\.server\.prot is not a known key/],
    ["server:\n  port: 99999\n", /config\.server\.port must be an integer in 0\.\.65535, got 99999/],
    ["logging:\n  level: loud\n", /config\.logging\.level must be one of debug, info, warn, error/],
    ["backends:\n  - kind: grpc\n    url: http://x\n", /config\.backends\[0\]\.kind must be one of dispatch, openai/],
    ["backends:\n  - kind: dispatch\n    url: ftp://x\n", /config\.backends\[0\]\.url must be an http\(s\) URL/],
    ["backends:\n  - kind: dispatch\n    url: http://x\n    weight: 2\n", /config\.backends\[0\]\.weight is not a known key/],
    ["backends:\n  - {kind: dispatch, url: 'http://a', id: x}\n  - {kind: dispatch, url: 'http://b', id: x}\n", /duplicate id 'x'/],
    ["server: [1\n", /not valid YAML/],
  ];
  for (const [i, [yaml, re]] of cases.entries()) {
    const p = file(`bad${i}.yaml`, yaml);
    expect(() => loadConfig({ argv: ["--config", p], env: {} })).toThrow(re);
  }
  expect(() => loadConfig({ argv: [], env: { DISPATCH_SERVER_PORT: "eighty" } })).toThrow(/DISPATCH_SERVER_PORT: config\.server\.port must be an integer/);
  expect(() => loadConfig({ argv: ["--prot", "1"], env: {} })).toThrow(ConfigError);
});

test("unknown DISPATCH_ variables are reported, not fatal; the env table lists every key", () => {
  expect(loadConfig({ argv: [], env: { DISPATCH_ROUTNG_POLICY: "x" } }).unknownEnv).toEqual(["DISPATCH_ROUTNG_POLICY"]);
  const names = envTable().map((r) => r.name);
  expect(names).toContain("DISPATCH_SERVER_MAX_BODY_BYTES");
  expect(names).toContain("DISPATCH_HEALTH_UNHEALTHY_AFTER");
});

test("routing.affinity_slack_ms: 20 by default, from YAML or DISPATCH_ROUTING_AFFINITY_SLACK_MS, bounded", () => {
  expect(loadConfig({ argv: [], env: {} }).config.routing.affinity_slack_ms).toBe(20);
  expect(loadConfig({ argv: [], env: { DISPATCH_ROUTING_AFFINITY_SLACK_MS: "250" } }).config.routing.affinity_slack_ms).toBe(250);
  expect(() => loadConfig({ argv: [], env: { DISPATCH_ROUTING_AFFINITY_SLACK_MS: "-1" } })).toThrow(/affinity_slack_ms/);
});
