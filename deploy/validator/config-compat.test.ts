/**
 * The chart must configure the programs it deploys the way they read their
 * configuration: the gateway's ConfigMap and env go through the gateway's own
 * loader (gateway/src/config), the model server's env through its own option
 * parser (model-server/src/rpc/options). A renamed key or variable fails here.
 */
import { describe, expect, test } from "bun:test";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadConfig } from "../../gateway/src/config/load-config";
import { FLAGS, parseOptions } from "../../model-server/src/rpc/options";
import { renderChart, type RenderOptions } from "../renderer/chart";
import { CHART_DIR } from "../scripts/plain-manifests";

type Obj = Record<string, any>;

function containerEnv(objs: Obj[], deployment: string): Record<string, string> {
  const d = objs.find((o) => o.kind === "Deployment" && o.metadata.name === deployment)!;
  const env: Record<string, string> = {};
  for (const e of d.spec.template.spec.containers[0].env ?? []) env[e.name] = e.value ?? (e.valueFrom?.fieldRef ? "dispatch" : "secret-value");
  return env;
}

function gatewayConfigFile(objs: Obj[]): string {
  const cm = objs.find((o) => o.kind === "ConfigMap" && o.metadata.name === "dispatch-gateway")!;
  const dir = mkdtempSync(join(tmpdir(), "dispatch-chart-"));
  const file = join(dir, "gateway.yaml");
  writeFileSync(file, cm.data["gateway.yaml"]);
  return file;
}

const HASH = `sha256:${"ab".repeat(32)}`;

const SCENARIOS: Record<string, RenderOptions> = {
  defaults: {},
  "auth with hashed keys and limits, external redis": {
    values: {
      auth: {
        enabled: true,
        pepper: "pepper",
        keys: [
          { id: "team-a", hash: HASH, requestsPerMinute: 600, tokensPerMinute: 200000 },
          { id: "team-b", hash: HASH.replace("ab", "cd") },
          { id: "batch", hash: HASH.replace("ab", "ef"), models: ["qwen3-30b-a3b"], priority: 0, disabled: true },
        ],
      },
      redis: { enabled: false, external: { url: "redis://redis.shared:6379/3" } },
      limits: { maxPromptTokens: 32768 },
    },
  },
  "static backends and passthrough config": {
    values: {
      discovery: { mode: "static", static: [{ url: "http://10.0.0.5:8000/v1", kind: "openai" }, { url: "http://10.0.0.6:50051" }] },
      gateway: { port: 9000, config: { routing: { policy: "least-outstanding" }, logging: { level: "debug" }, server: { port: 1 } } },
      limits: { maxBodyBytes: 1048576 },
    },
  },
};

describe("the chart configures the gateway the way its loader reads it", () => {
  for (const [name, opts] of Object.entries(SCENARIOS)) {
    test(name, () => {
      const objs = renderChart(CHART_DIR, opts) as unknown as { object: Obj }[];
      const objects = objs.map((o) => o.object);
      const env = containerEnv(objects, "dispatch-gateway");
      env.DISPATCH_CONFIG = gatewayConfigFile(objects);
      const { config, unknownEnv } = loadConfig({ argv: [], env });
      const port = objects.find((o) => o.kind === "Deployment" && o.metadata.name === "dispatch-gateway")!.spec.template.spec.containers[0].ports[0].containerPort;
      expect(config.server.port).toBe(port); // the probes and Service target this port
      expect(config.server.host).toBe("0.0.0.0");
      expect(unknownEnv).toEqual([]); // every DISPATCH_ variable the chart sets is one the gateway reads
      if (opts.values?.auth) {
        expect(config.auth.keys).toEqual([
          { id: "team-a", hash: HASH, requestsPerMinute: 600, tokensPerMinute: 200000, disabled: false },
          { id: "team-b", hash: HASH.replace("ab", "cd"), requestsPerMinute: undefined, tokensPerMinute: undefined, disabled: false },
          // disabled, models and priority (0 included) reach the gateway
          { id: "batch", hash: HASH.replace("ab", "ef"), requestsPerMinute: undefined, tokensPerMinute: undefined, disabled: true, models: ["qwen3-30b-a3b"], priority: 0 },
        ]);
        expect(config.auth.pepper).toBe("secret-value"); // from the Secret, through DISPATCH_AUTH_PEPPER
        expect(config.redis.url).toBe("secret-value");
        expect(config.server.max_prompt_tokens).toBe(32768);
      } else {
        expect(config.discovery).toMatchObject(
          opts.values?.discovery ? { mode: "static" } : { mode: "kubernetes", label_selector: "kubernetes.io/service-name=dispatch-model-server", port_name: "rpc", namespace: "dispatch" },
        );
      }
      if (opts.values?.discovery) {
        expect(config.backends.map((b) => [b.kind, b.url])).toEqual([
          ["openai", "http://10.0.0.5:8000/v1"],
          ["dispatch", "http://10.0.0.6:50051"],
        ]);
        expect(config.server.max_body_bytes).toBe(1048576);
        expect(config.logging.level).toBe("debug");
      }
    });
  }
});

describe("the chart configures the model server the way its options parser reads it", () => {
  for (const gpus of [1, 0]) {
    test(`gpus=${gpus}`, () => {
      const objects = renderChart(CHART_DIR, { values: { modelServer: { gpus } } }).map((o) => o.object as Obj);
      const env = containerEnv(objects, "dispatch-model-server");
      const known = new Set([...FLAGS.map((f) => f.env).filter(Boolean), "DISPATCH_MODEL_PATH"]);
      for (const name of Object.keys(env).filter((n) => n.startsWith("DISPATCH_"))) expect(known.has(name)).toBe(true);
      const o = parseOptions([], env);
      expect(o.port).toBe(objects.find((x) => x.kind === "Service" && x.metadata.name === "dispatch-model-server")!.spec.ports[0].port);
      expect(o.host).toBe("0.0.0.0");
      expect(o.backend).toBe(gpus > 0 ? "cuda" : "cpu");
      expect(o.model).toBe("/models/model");
    });
  }
});

test("a misspelled key in gateway.config fails here, not at pod start", () => {
  const objects = renderChart(CHART_DIR, { values: { gateway: { config: { routing: { polcy: "x" } } } } }).map((o) => o.object as Obj);
  const env = { DISPATCH_CONFIG: gatewayConfigFile(objects) };
  expect(() => loadConfig({ argv: [], env })).toThrow(/routing.polcy is not a known key/);
});

test("large numbers reach the gateway as plain integers (not Helm's 4.194304e+06)", () => {
  const objects = renderChart(CHART_DIR, { values: { limits: { maxBodyBytes: 16777216, maxPromptTokens: 1000000 } } }).map((o) => o.object as Obj);
  const env = containerEnv(objects, "dispatch-gateway");
  expect(env.DISPATCH_SERVER_MAX_PROMPT_TOKENS).toBe("1000000");
  env.DISPATCH_CONFIG = gatewayConfigFile(objects);
  expect(loadConfig({ argv: [], env }).config.server.max_body_bytes).toBe(16777216);
});

test("hashed keys without a pepper stop the gateway at start with a clear message", () => {
  const env = { DISPATCH_AUTH_KEYS: JSON.stringify([{ id: "a", hash: `sha256:${"ab".repeat(32)}` }]) };
  expect(() => loadConfig({ argv: [], env })).toThrow(/auth.keys needs config.auth.pepper/);
  expect(loadConfig({ argv: [], env: { ...env, DISPATCH_AUTH_PEPPER: "p" } }).config.auth.keys.length).toBe(1);
});
