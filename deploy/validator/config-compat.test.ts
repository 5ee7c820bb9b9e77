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

/**
 * Variables the chart already sets for production features whose wiring into
 * the gateway's config loader is pending (see docs/deploy.md). The gateway
 * logs them as unknown and carries on; remove each from this list once the
 * loader knows it.
 */
const PENDING_GATEWAY_ENV = new Set([
  "DISPATCH_DISCOVERY_MODE",
  "DISPATCH_DISCOVERY_NAMESPACE",
  "DISPATCH_DISCOVERY_LABEL_SELECTOR",
  "DISPATCH_DISCOVERY_PORT_NAME",
  "DISPATCH_REDIS_URL",
  "DISPATCH_AUTH_PEPPER",
  "DISPATCH_SERVER_MAX_PROMPT_TOKENS",
]);

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

const SCENARIOS: Record<string, RenderOptions> = {
  defaults: {},
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
      expect(unknownEnv.filter((n) => !PENDING_GATEWAY_ENV.has(n))).toEqual([]);
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
