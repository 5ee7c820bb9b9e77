/**
 * The chart's alert rules may only name metrics the programs register: the
 * registries are built here and their `# TYPE` lines are the truth. A renamed
 * metric fails CI instead of silently turning an alert off.
 */
import { expect, test } from "bun:test";
import { Registry } from "prom-client";
import { createMetrics as createGatewayMetrics } from "../../gateway/src/metrics";
import { registerProductionMetrics } from "../../gateway/src/telemetry/metrics";
import { createMetrics as createModelServerMetrics } from "../../model-server/src/rpc/metrics";
import { createServingState } from "../../model-server/src/rpc/serving-state";
import { registerEngineMetrics } from "../../model-server/src/telemetry/engine-metrics";
import { renderChart } from "../renderer/chart";
import { CHART_DIR } from "../scripts/plain-manifests";

async function registeredMetricNames(): Promise<Set<string>> {
  const texts: string[] = [];
  const gw = createGatewayMetrics({ members: [] } as never);
  registerProductionMetrics(gw.registry, { backendLoads: () => [], discoveredBackends: () => [] });
  texts.push(await gw.registry.metrics());
  texts.push(await createModelServerMetrics(createServingState()).render());
  const engine = new Registry();
  registerEngineMetrics(engine);
  texts.push(await engine.metrics());
  const names = new Set<string>();
  for (const t of texts) for (const m of t.matchAll(/^# TYPE (\S+) (\w+)$/gm)) names.add(m[1]!);
  return names;
}

test("every metric an alert names is registered by the gateway or the model server", async () => {
  const names = await registeredMetricNames();
  expect(names.size).toBeGreaterThan(20);
  const rule = renderChart(CHART_DIR, { apiVersions: ["monitoring.coreos.com/v1"] }).find((o) => o.object.kind === "PrometheusRule")!.object as any;
  const exprs: string[] = rule.spec.groups.flatMap((g: any) => g.rules.map((r: any) => String(r.expr)));
  expect(exprs.length).toBeGreaterThan(5);
  for (const expr of exprs) {
    const used = [...expr.matchAll(/\b(dispatch_[a-z_]+)/g)].map((m) => m[1]!.replace(/_(bucket|sum|count)$/, ""));
    expect(used.length).toBeGreaterThan(0);
    for (const name of used) expect({ expr, name, registered: names.has(name) }).toEqual({ expr, name, registered: true });
    // Balanced brackets: a template slip would show here.
    for (const [open, close] of [["(", ")"], ["{", "}"], ["[", "]"]] as const) expect(expr.split(open).length).toBe(expr.split(close).length);
    expect(expr).not.toContain("{{");
  }
  // Prometheus' own templating survives Helm's: $labels reaches the rule text.
  expect(JSON.stringify(rule)).toContain("{{ $labels.pod }}");
});

test("no PrometheusRule without the operator", () => {
  expect(renderChart(CHART_DIR).some((o) => o.object.kind === "PrometheusRule")).toBe(false);
});
