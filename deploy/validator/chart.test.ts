import { describe, expect, test } from "bun:test";
import { renderChart, type RenderOptions } from "../renderer/chart";
import { CHART_DIR } from "../scripts/plain-manifests";
import { validateManifests } from "./validate";

const PROM = ["monitoring.coreos.com/v1"];
const render = (opts: RenderOptions = {}) => renderChart(CHART_DIR, opts).map((r) => r.object as Record<string, any>);
const find = (objs: Record<string, any>[], kind: string, name: string) => objs.find((o) => o.kind === kind && o.metadata.name === name);

/** Value sets a user is likely to install with; every one must render and validate. */
const SCENARIOS: Record<string, RenderOptions> = {
  defaults: {},
  "prometheus operator present": { apiVersions: PROM },
  "auth on, external redis, static discovery, cpu model server": {
    apiVersions: PROM,
    release: { name: "prod", namespace: "ai" },
    values: {
      auth: { enabled: true, pepper: "pepper", keys: [{ id: "team-a", hash: `sha256:${"ab".repeat(32)}`, requestsPerMinute: 60, tokensPerMinute: 10000 }] },
      redis: { enabled: false, external: { url: "redis://redis.shared:6379/3" } },
      discovery: { mode: "static", static: [{ url: "http://10.0.0.5:8000", kind: "openai" }] },
      modelServer: { gpus: 0, model: { volume: { persistentVolumeClaim: { claimName: "models" } } } },
      gateway: { autoscaling: { enabled: false }, podDisruptionBudget: { enabled: false }, config: { routing: { policy: "cache_aware" } } },
      tracing: { otlpEndpoint: "http://otel-collector:4318" },
    },
  },
  "existing secrets, no bundled model server": {
    values: {
      auth: { enabled: true, existingSecret: "my-auth" },
      redis: { enabled: false, external: { existingSecret: "my-redis" } },
      modelServer: { enabled: false },
      serviceAccount: { create: false, name: "" },
      discovery: { mode: "static" },
    },
  },
};

describe("helm chart renders to valid Kubernetes objects", () => {
  for (const [name, opts] of Object.entries(SCENARIOS)) {
    test(name, () => {
      const objects = render(opts);
      expect(objects.length).toBeGreaterThan(3);
      const problems = validateManifests(objects, { external: { secrets: ["my-auth", "my-redis"] } });
      expect(problems).toEqual([]);
    });
  }

  test("what the issue asks for is there", () => {
    const objs = render({ apiVersions: PROM });
    const gw = find(objs, "Deployment", "dispatch-gateway")!;
    const c = gw.spec.template.spec.containers[0];
    expect(c.livenessProbe.httpGet.path).toBe("/healthz");
    expect(c.readinessProbe.httpGet.path).toBe("/readyz");
    expect(c.securityContext.runAsNonRoot).toBe(true);
    expect(find(objs, "HorizontalPodAutoscaler", "dispatch-gateway")).toBeDefined();
    expect(find(objs, "PodDisruptionBudget", "dispatch-gateway")).toBeDefined();
    const ms = find(objs, "Deployment", "dispatch-model-server")!;
    expect(ms.spec.template.spec.containers[0].resources.limits["nvidia.com/gpu"]).toBe("1");
    expect(find(objs, "Deployment", "dispatch-redis")).toBeDefined();
    const role = find(objs, "Role", "dispatch-gateway-discovery")!;
    expect(role.rules[0]).toEqual({ apiGroups: ["discovery.k8s.io"], resources: ["endpointslices"], verbs: ["get", "list", "watch"] });
    expect(objs.filter((o) => o.kind === "ServiceMonitor").length).toBe(2);
    expect(render().filter((o) => o.kind === "ServiceMonitor").length).toBe(0);
    const selector = c.env.find((e: any) => e.name === "DISPATCH_DISCOVERY_LABEL_SELECTOR").value;
    expect(selector).toBe("kubernetes.io/service-name=dispatch-model-server");
  });

  test("auth without a pepper or secret is refused at render time", () => {
    expect(() => render({ values: { auth: { enabled: true } } })).toThrow(/auth.pepper/);
  });
});

describe("the validator catches broken manifests", () => {
  const base = () => structuredClone(render({ apiVersions: PROM }));
  const gateway = (objs: Record<string, any>[]) => find(objs, "Deployment", "dispatch-gateway")!;

  test("misspelled field", () => {
    const objs = base();
    const c = gateway(objs).spec.template.spec.containers[0];
    c.livenesProbe = c.livenessProbe;
    delete c.livenessProbe;
    expect(validateManifests(objs).join("\n")).toMatch(/containers\[0\]\.livenesProbe: unknown field/);
  });

  test("wrong type and missing required field", () => {
    const objs = base();
    gateway(objs).spec.template.spec.containers[0].ports[0].containerPort = "eighty";
    delete find(objs, "Service", "dispatch-gateway")!.spec.ports[0].port;
    const text = validateManifests(objs).join("\n");
    expect(text).toMatch(/Deployment\/dispatch-gateway: schema/);
    expect(text).toMatch(/Service\/dispatch-gateway: schema/);
  });

  test("selector drift, dangling references and unknown kinds", () => {
    const objs = base();
    gateway(objs).spec.template.metadata.labels["app.kubernetes.io/component"] = "gw";
    find(objs, "RoleBinding", "dispatch-gateway-discovery")!.roleRef.name = "nope";
    gateway(objs).spec.template.spec.containers[0].readinessProbe.httpGet.port = "metrics";
    find(objs, "NetworkPolicy", "dispatch-redis")!.spec.ingress[0].from[0].podSelector.matchLabels["app.kubernetes.io/component"] = "gatway";
    objs.push({ apiVersion: "networking.k8s.io/v1", kind: "Ingres", metadata: { name: "x" } });
    const text = validateManifests(objs).join("\n");
    expect(text).toMatch(/selector does not match the pod template labels/);
    expect(text).toMatch(/Role nope does not exist/);
    expect(text).toMatch(/readinessProbe uses unknown port metrics/);
    expect(text).toMatch(/no schema for networking.k8s.io\/v1\/Ingres/);
    expect(text).toMatch(/NetworkPolicy\/dispatch-redis: ingress from a podSelector that matches no pod template/);
  });
});

describe("values.schema.json catches bad values before anything renders", () => {
  test("typos and wrong types are refused with the path", () => {
    expect(() => render({ values: { modelServer: { gpu: 2 } } })).toThrow(/modelServer: unknown key gpu/);
    expect(() => render({ values: { gateway: { replicas: "two" } } })).toThrow(/gateway.replicas: expected integer, got string/);
    expect(() => render({ values: { discovery: { mode: "dns" } } })).toThrow(/discovery.mode: must be one of/);
    expect(() => render({ values: { auth: { enabled: true, pepper: "p", keys: [{ id: "a", hash: "plaintext-key" }] } } })).toThrow(/auth.keys\[0\].hash: must match/);
  });
  test("passthrough maps accept anything", () => {
    expect(() => render({ values: { gateway: { config: { anything: { goes: [1] } }, nodeSelector: { "x/y": "z" } } } })).not.toThrow(/schema/);
  });
});
