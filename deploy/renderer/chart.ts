/**
 * Renders a Helm chart directory offline, as `helm template` would for the
 * subset in parse.ts: values.yaml deep-merged with overrides, the built-in
 * objects (.Values, .Release, .Chart, .Capabilities, .Template), values
 * checked against values.schema.json when the chart has one, named
 * templates from `_*.tpl` files, one output per `templates/*.yaml`, split into
 * YAML documents and parsed. NOTES.txt is not rendered (Helm prints it).
 *
 * @example
 * const objects = renderChart("deploy/helm/dispatch", { release: { name: "dispatch", namespace: "ai" } });
 * for (const o of objects) console.log(o.source, o.object.kind);
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { parseAllDocuments, parse as parseYaml } from "yaml";
import { TemplateError } from "./errors";
import { Executor } from "./evaluate";
import { createFunctions } from "./functions";
import { parseTemplate, type Node } from "./parse";
import { checkValues } from "./values-schema";

export interface RenderOptions {
  release?: { name?: string; namespace?: string; isUpgrade?: boolean; revision?: number };
  /** Values merged over values.yaml (`helm -f` / `--set`). `null` deletes a default, as in Helm. */
  values?: Record<string, unknown>;
  /** API versions the target cluster serves beyond the built-in ones (e.g. "monitoring.coreos.com/v1"). */
  apiVersions?: string[];
  kubeVersion?: string;
}

export interface RenderedObject {
  /** Template file the object came from, e.g. `templates/gateway-deployment.yaml`. */
  source: string;
  object: Record<string, unknown>;
}

const BUILTIN_API_VERSIONS = [
  "v1",
  "apps/v1",
  "autoscaling/v2",
  "policy/v1",
  "rbac.authorization.k8s.io/v1",
  "discovery.k8s.io/v1",
  "networking.k8s.io/v1",
  "batch/v1",
];

/** Deep merge with Helm's rules: maps merge, everything else replaces, null removes. */
export function mergeValues(base: unknown, over: unknown): unknown {
  if (!isMap(base) || !isMap(over)) return over === undefined ? base : over;
  const out: Record<string, unknown> = { ...base };
  for (const [k, v] of Object.entries(over)) {
    if (v === null) delete out[k];
    else out[k] = mergeValues(base[k], v);
  }
  return out;
}

function isMap(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** Renders every template of the chart at `dir` to text, keyed by template path. */
export function renderChartText(dir: string, opts: RenderOptions = {}): Map<string, string> {
  const chart = parseYaml(readFileSync(join(dir, "Chart.yaml"), "utf8")) as Record<string, string>;
  const defaults = parseYaml(readFileSync(join(dir, "values.yaml"), "utf8")) ?? {};
  const values = mergeValues(defaults, opts.values ?? {});
  const schemaPath = join(dir, "values.schema.json");
  if (existsSync(schemaPath)) {
    const problems = checkValues(JSON.parse(readFileSync(schemaPath, "utf8")), values);
    if (problems.length) throw new TemplateError(`values do not match values.schema.json:\n  ${problems.join("\n  ")}`);
  }
  const apiVersions = new Set([...BUILTIN_API_VERSIONS, ...(opts.apiVersions ?? [])]);
  const kube = opts.kubeVersion ?? "v1.31.0";
  const [major, minor] = kube.replace(/^v/, "").split(".");
  const top = {
    Values: values,
    Release: {
      Name: opts.release?.name ?? "dispatch",
      Namespace: opts.release?.namespace ?? "default",
      Service: "Helm",
      IsInstall: !opts.release?.isUpgrade,
      IsUpgrade: !!opts.release?.isUpgrade,
      Revision: opts.release?.revision ?? 1,
    },
    Chart: { Name: chart.name, Version: chart.version, AppVersion: chart.appVersion },
    Capabilities: {
      APIVersions: { Has: (v: unknown) => apiVersions.has(String(v)) },
      KubeVersion: { Version: kube, Major: major, Minor: minor },
    },
    Template: { BasePath: `${chart.name}/templates`, Name: "" },
  };

  const files = readdirSync(join(dir, "templates")).sort();
  for (const f of files) {
    if (!/\.(yaml|tpl|txt)$/.test(f)) throw new TemplateError(`templates/${f}: unexpected file type`);
  }
  const defines = new Map<string, Node[]>();
  const bodies = new Map<string, Node[]>();
  let functions: ReturnType<typeof createFunctions>;
  const names = new Set(Object.keys(createFunctions({ include: () => "" })));
  let depth = 0;
  const include = (name: string, data: unknown): string => {
    const body = defines.get(name);
    if (!body) throw new TemplateError(`include: no template named ${JSON.stringify(name)}`);
    if (++depth > 50) throw new TemplateError(`include: recursion too deep at ${name}`);
    try {
      return new Executor(`define ${name}`, functions).run(body, data);
    } finally {
      depth--;
    }
  };
  functions = createFunctions({ include });
  for (const f of files) {
    if (f === "NOTES.txt") continue;
    const parsed = parseTemplate(readFileSync(join(dir, "templates", f), "utf8"), `templates/${f}`, (n) => names.has(n));
    for (const [n, body] of parsed.defines) {
      if (defines.has(n)) throw new TemplateError(`templates/${f}: template ${n} defined twice`);
      defines.set(n, body);
    }
    if (f.endsWith(".yaml")) {
      bodies.set(`templates/${f}`, parsed.body);
      // As in Helm, a file is also a named template under its path (for checksum annotations).
      defines.set(`${chart.name}/templates/${f}`, parsed.body);
    }
    else if (parsed.body.some((n) => n.kind !== "text" || n.text.trim())) {
      throw new TemplateError(`templates/${f}: a .tpl file may hold only define blocks`);
    }
  }
  const out = new Map<string, string>();
  for (const [path, body] of bodies) {
    const data = { ...top, Template: { ...top.Template, Name: `${chart.name}/${path}` } };
    out.set(path, new Executor(path, functions).run(body, data));
  }
  return out;
}

/** Renders the chart and parses every non-empty YAML document into an object. */
export function renderChart(dir: string, opts: RenderOptions = {}): RenderedObject[] {
  const objects: RenderedObject[] = [];
  for (const [source, text] of renderChartText(dir, opts)) {
    for (const doc of parseAllDocuments(text, { version: "1.1" })) {
      if (doc.errors.length) throw new TemplateError(`${source}: invalid YAML after rendering: ${doc.errors[0]!.message}`);
      const object = doc.toJS();
      if (object === null || object === undefined) continue;
      if (!isMap(object)) throw new TemplateError(`${source}: a document is not a mapping`);
      objects.push({ source, object });
    }
  }
  return objects;
}
