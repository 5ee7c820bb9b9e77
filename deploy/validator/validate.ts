/**
 * Offline validation of rendered manifests, the stand-in for an API server in
 * CI: each object against its kind's schema (kubernetes-models), a strict
 * field check (strict-keys.ts), and the cross-object rules a schema cannot see
 * (selectors match pod labels, named ports and referenced ConfigMaps, Secrets,
 * ServiceAccounts and scale targets exist, names are DNS-safe and unique).
 *
 * @example
 * const problems = validateManifests(renderChart("deploy/helm/dispatch").map((r) => r.object));
 * if (problems.length) throw new Error(problems.join("\n"));
 */
import { kindKey, MODEL_CLASSES, type KnownKinds } from "./kinds";
import { createStrictKeyChecker, type StrictKeyChecker } from "./strict-keys";

type Obj = Record<string, any>;

export interface ValidateOptions {
  /** Secrets/ConfigMaps that exist outside the manifests (e.g. auth.existingSecret). */
  external?: { secrets?: string[]; configMaps?: string[] };
}

let checker: StrictKeyChecker | undefined;

const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;

/** Returns one line per problem; an empty list means every object is valid. */
export function validateManifests(objects: Obj[], opts: ValidateOptions = {}): string[] {
  checker ??= createStrictKeyChecker();
  const problems: string[] = [];
  const seen = new Set<string>();
  for (const o of objects) {
    const id = `${o.kind ?? "?"}/${o.metadata?.name ?? "?"}`;
    const report = (msg: string) => problems.push(`${id}: ${msg}`);
    const key = kindKey(o);
    const Cls = MODEL_CLASSES[key as keyof KnownKinds];
    if (!Cls) {
      report(`no schema for ${key} (add it to deploy/validator/kinds.ts)`);
      continue;
    }
    try {
      new Cls(o as never).validate();
    } catch (e) {
      report(`schema: ${(e as Error).message.replace(/\s+/g, " ")}`);
    }
    for (const p of checker(o)) report(p);
    const name = o.metadata?.name;
    if (typeof name !== "string" || name.length > 253 || !DNS1123_SUBDOMAIN.test(name)) report("metadata.name is not a DNS-1123 name");
    if (["Service", "Deployment"].includes(o.kind) && (typeof name !== "string" || name.length > 63 || !DNS1123_LABEL.test(name)))
      report(`a ${o.kind} name must be a DNS-1123 label (<= 63 chars)`);
    if (seen.has(id)) report("defined twice");
    seen.add(id);
    for (const [k, v] of Object.entries({ ...o.metadata?.labels, ...o.spec?.template?.metadata?.labels })) {
      if (typeof v !== "string" || v.length > 63 || !LABEL_VALUE.test(v)) report(`label ${k}=${String(v)} is not a valid label value`);
    }
  }
  problems.push(...crossChecks(objects, opts));
  return problems;
}

function crossChecks(objects: Obj[], opts: ValidateOptions): string[] {
  const problems: string[] = [];
  const byKind = (kind: string) => objects.filter((o) => o.kind === kind);
  const names = (kind: string) => new Set(byKind(kind).map((o) => o.metadata?.name));
  const secrets = new Set([...names("Secret"), ...(opts.external?.secrets ?? [])]);
  const configMaps = new Set([...names("ConfigMap"), ...(opts.external?.configMaps ?? [])]);
  const serviceAccounts = new Set([...names("ServiceAccount"), "default"]);
  const workloads = byKind("Deployment");
  const matches = (selector: Obj | undefined, labels: Obj | undefined) =>
    !!selector && Object.keys(selector).length > 0 && Object.entries(selector).every(([k, v]) => labels?.[k] === v);

  for (const d of workloads) {
    const at = `Deployment/${d.metadata?.name}`;
    const pod = d.spec?.template;
    if (!matches(d.spec?.selector?.matchLabels, pod?.metadata?.labels)) problems.push(`${at}: selector does not match the pod template labels`);
    const spec = pod?.spec ?? {};
    const sa = spec.serviceAccountName;
    if (sa && !serviceAccounts.has(sa)) problems.push(`${at}: serviceAccountName ${sa} does not exist`);
    const volumes = new Set((spec.volumes ?? []).map((v: Obj) => v.name));
    for (const v of spec.volumes ?? []) {
      if (v.configMap && !configMaps.has(v.configMap.name)) problems.push(`${at}: volume ${v.name} uses missing ConfigMap ${v.configMap.name}`);
      if (v.secret && !secrets.has(v.secret.secretName)) problems.push(`${at}: volume ${v.name} uses missing Secret ${v.secret.secretName}`);
    }
    for (const c of spec.containers ?? []) {
      const cat = `${at} container ${c.name}`;
      const ports = new Set((c.ports ?? []).map((p: Obj) => p.name));
      for (const probe of ["startupProbe", "livenessProbe", "readinessProbe"]) {
        const port = c[probe]?.httpGet?.port ?? c[probe]?.tcpSocket?.port;
        if (typeof port === "string" && !ports.has(port)) problems.push(`${cat}: ${probe} uses unknown port ${port}`);
      }
      for (const m of c.volumeMounts ?? []) if (!volumes.has(m.name)) problems.push(`${cat}: volumeMount ${m.name} has no volume`);
      const envNames = new Set<string>();
      for (const e of c.env ?? []) {
        if (envNames.has(e.name)) problems.push(`${cat}: env ${e.name} set twice`);
        envNames.add(e.name);
        const ref = e.valueFrom?.secretKeyRef;
        if (ref && !secrets.has(ref.name)) problems.push(`${cat}: env ${e.name} uses missing Secret ${ref.name}`);
        const cm = e.valueFrom?.configMapKeyRef;
        if (cm && !configMaps.has(cm.name)) problems.push(`${cat}: env ${e.name} uses missing ConfigMap ${cm.name}`);
      }
    }
  }

  for (const s of byKind("Service")) {
    const at = `Service/${s.metadata?.name}`;
    const targets = workloads.filter((d) => matches(s.spec?.selector, d.spec?.template?.metadata?.labels));
    if (!targets.length) {
      problems.push(`${at}: selector matches no pod template`);
      continue;
    }
    for (const p of s.spec?.ports ?? []) {
      if (typeof p.targetPort !== "string") continue;
      const named = targets.some((d) =>
        (d.spec.template.spec.containers ?? []).some((c: Obj) => (c.ports ?? []).some((cp: Obj) => cp.name === p.targetPort)),
      );
      if (!named) problems.push(`${at}: targetPort ${p.targetPort} is not a container port name`);
    }
  }

  for (const h of byKind("HorizontalPodAutoscaler")) {
    const ref = h.spec?.scaleTargetRef;
    if (!workloads.some((d) => d.metadata?.name === ref?.name && ref?.kind === "Deployment"))
      problems.push(`HorizontalPodAutoscaler/${h.metadata?.name}: scaleTargetRef ${ref?.kind}/${ref?.name} does not exist`);
    if (h.spec?.minReplicas > h.spec?.maxReplicas) problems.push(`HorizontalPodAutoscaler/${h.metadata?.name}: minReplicas > maxReplicas`);
  }

  for (const p of byKind("PodDisruptionBudget")) {
    if (!workloads.some((d) => matches(p.spec?.selector?.matchLabels, d.spec?.template?.metadata?.labels)))
      problems.push(`PodDisruptionBudget/${p.metadata?.name}: selector matches no pod template`);
  }

  for (const b of byKind("RoleBinding")) {
    const at = `RoleBinding/${b.metadata?.name}`;
    if (b.roleRef?.kind === "Role" && !names("Role").has(b.roleRef.name)) problems.push(`${at}: Role ${b.roleRef.name} does not exist`);
    for (const s of b.subjects ?? []) {
      if (s.kind === "ServiceAccount" && !serviceAccounts.has(s.name)) problems.push(`${at}: ServiceAccount ${s.name} does not exist`);
    }
  }

  for (const n of byKind("NetworkPolicy")) {
    const at = `NetworkPolicy/${n.metadata?.name}`;
    if (!workloads.some((d) => matches(n.spec?.podSelector?.matchLabels, d.spec?.template?.metadata?.labels))) problems.push(`${at}: podSelector matches no pod template`);
    for (const rule of n.spec?.ingress ?? [])
      for (const from of rule.from ?? [])
        if (from.podSelector && !workloads.some((d) => matches(from.podSelector.matchLabels, d.spec?.template?.metadata?.labels)))
          problems.push(`${at}: ingress from a podSelector that matches no pod template`);
  }

  for (const d of workloads) {
    for (const t of d.spec?.template?.spec?.topologySpreadConstraints ?? [])
      if (!matches(t.labelSelector?.matchLabels, d.spec.template.metadata?.labels))
        problems.push(`Deployment/${d.metadata?.name}: topologySpreadConstraint selector does not match its own pods`);
  }

  for (const m of byKind("ServiceMonitor")) {
    const services = byKind("Service").filter((s) => matches(m.spec?.selector?.matchLabels, s.metadata?.labels));
    if (!services.length) problems.push(`ServiceMonitor/${m.metadata?.name}: selector matches no Service`);
    for (const e of m.spec?.endpoints ?? []) {
      if (!services.some((s) => (s.spec?.ports ?? []).some((p: Obj) => p.name === e.port)))
        problems.push(`ServiceMonitor/${m.metadata?.name}: endpoint port ${e.port} is not a Service port name`);
    }
  }
  return problems;
}
