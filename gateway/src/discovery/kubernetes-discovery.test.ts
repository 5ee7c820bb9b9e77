import { afterEach, describe, expect, test } from "bun:test";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { DiscoveredBackend } from "./discovery";
import { backendsFromSlices, type EndpointSlice } from "./endpoint-slices";
import { startFakeKubeApi, type FakeKubeApi } from "./fake-kube-api";
import { createKubernetesApi } from "./kubernetes-api";
import { createKubernetesDiscovery } from "./kubernetes-discovery";
import { createStaticDiscovery } from "./static-discovery";

const SELECTOR = "kubernetes.io/service-name=dispatch-model-server";
const LABELS = { "kubernetes.io/service-name": "dispatch-model-server" };

function slice(name: string, eps: { ip: string; pod: string; ready?: boolean; terminating?: boolean }[], labels: Record<string, string> = LABELS) {
  return {
    metadata: { name, labels },
    addressType: "IPv4",
    ports: [{ name: "rpc", port: 50051, protocol: "TCP" }],
    endpoints: eps.map((e) => ({ addresses: [e.ip], conditions: { ready: e.ready ?? true, terminating: e.terminating ?? false }, targetRef: { kind: "Pod", name: e.pod } })),
  };
}

/** Polls until `pred` holds (bounded), returning the last list seen. */
async function until(get: () => DiscoveredBackend[], pred: (b: DiscoveredBackend[]) => boolean, ms = 3000) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (pred(get())) return get();
    await Bun.sleep(10);
  }
  throw new Error(`timed out; last list: ${JSON.stringify(get())}`);
}

describe("endpoint slices -> backends (pure)", () => {
  test("ready unset counts as ready; not-ready, terminating and other ports are skipped; IPv6 bracketed; deduped", () => {
    const s1: EndpointSlice = {
      metadata: { name: "a" },
      addressType: "IPv4",
      ports: [{ name: "metrics", port: 9090 }, { name: "rpc", port: 50051 }],
      endpoints: [
        { addresses: ["10.0.0.1"], targetRef: { name: "ms-0" } },
        { addresses: ["10.0.0.2"], conditions: { ready: false }, targetRef: { name: "ms-1" } },
        { addresses: ["10.0.0.3"], conditions: { ready: true, terminating: true }, targetRef: { name: "ms-2" } },
      ],
    };
    const s2: EndpointSlice = { metadata: { name: "b" }, addressType: "IPv6", ports: [{ name: "rpc", port: 50051 }], endpoints: [{ addresses: ["fd00::5"] }, { addresses: ["10.0.0.1"], targetRef: { name: "ms-0" } }] };
    expect(backendsFromSlices([s1, s2], "rpc")).toEqual([
      { id: "[fd00::5]:50051", url: "http://[fd00::5]:50051", kind: "dispatch", source: "kubernetes" },
      { id: "ms-0", url: "http://10.0.0.1:50051", kind: "dispatch", source: "kubernetes" },
    ]);
    expect(backendsFromSlices([s1], "nope")).toEqual([]);
  });

  test("static discovery validates its list", () => {
    expect(createStaticDiscovery([{ url: "http://10.0.0.5:8000/", kind: "openai" }]).current()).toEqual([
      { id: "10.0.0.5:8000", url: "http://10.0.0.5:8000", kind: "openai", source: "static" },
    ]);
    expect(() => createStaticDiscovery([{ url: "ftp://x" }])).toThrow(/http/);
    expect(() => createStaticDiscovery([{ url: "http://a:1" }, { url: "http://a:1" }])).toThrow(/duplicate/);
  });
});

describe("kubernetes discovery against a fake API server on loopback", () => {
  let fake: FakeKubeApi | undefined;
  const stops: (() => void)[] = [];
  afterEach(() => {
    stops.splice(0).forEach((s) => s());
    fake?.stop();
  });

  function setup(token = "sa-token") {
    fake = startFakeKubeApi({ namespace: "ai", token: "sa-token" });
    const dir = mkdtempSync(join(tmpdir(), "sa-"));
    writeFileSync(join(dir, "token"), token);
    const api = createKubernetesApi({ server: fake.url, tokenPath: join(dir, "token") });
    const errors: Error[] = [];
    const d = createKubernetesDiscovery({ api, namespace: "ai", labelSelector: SELECTOR, portName: "rpc", minBackoffMs: 20, maxBackoffMs: 100, onError: (e) => errors.push(e) });
    stops.push(() => d.stop());
    return { d, errors, fake: fake! };
  }

  test("list, then watch adds, readiness changes and deletes", async () => {
    const { d, fake } = setup();
    fake.upsert(slice("s1", [{ ip: "10.0.0.1", pod: "ms-0" }]));
    fake.upsert(slice("other", [{ ip: "10.9.9.9", pod: "x" }], { "kubernetes.io/service-name": "something-else" }));
    const changes: string[][] = [];
    d.onChange((l) => changes.push(l.map((b) => b.id)));
    await d.start();
    expect(d.current().map((b) => b.url)).toEqual(["http://10.0.0.1:50051"]);
    await until(() => (fake.openWatches() ? [] : [d.current()[0]!]), (l) => l.length === 0);
    fake.upsert(slice("s1", [{ ip: "10.0.0.1", pod: "ms-0" }, { ip: "10.0.0.2", pod: "ms-1" }]));
    await until(d.current, (l) => l.length === 2);
    fake.upsert(slice("s1", [{ ip: "10.0.0.1", pod: "ms-0", terminating: true }, { ip: "10.0.0.2", pod: "ms-1" }]));
    await until(d.current, (l) => l.length === 1 && l[0]!.id === "ms-1");
    fake.remove("s1");
    await until(d.current, (l) => l.length === 0);
    expect(changes).toEqual([["ms-0"], ["ms-0", "ms-1"], ["ms-1"], []]);
    expect(fake.requests.every((r) => r.includes("labelSelector=kubernetes.io%2Fservice-name%3Ddispatch-model-server"))).toBe(true);
  });

  test("an expired watch (410) relists; API errors back off and keep the last list", async () => {
    const { d, fake, errors } = setup();
    fake.upsert(slice("s1", [{ ip: "10.0.0.1", pod: "ms-0" }]));
    await d.start();
    await until(() => (fake.openWatches() ? [] : [d.current()[0]!]), (l) => l.length === 0);
    const listsBefore = fake.requests.filter((r) => !r.includes("watch=1")).length;
    fake.failNext(2, 503);
    fake.expireWatches();
    fake.upsert(slice("s2", [{ ip: "10.0.0.7", pod: "ms-7" }]));
    expect(d.current().map((b) => b.id)).toEqual(["ms-0"]); // kept while the API fails
    await until(d.current, (l) => l.length === 2);
    expect(fake.requests.filter((r) => !r.includes("watch=1")).length).toBeGreaterThan(listsBefore);
    expect(errors.some((e) => e.message.includes("503"))).toBe(true);
  });

  test("a wrong token is reported, start() still resolves, nothing is discovered", async () => {
    const { d, errors } = setup("wrong-token");
    await d.start();
    expect(d.current()).toEqual([]);
    expect(errors[0]?.message).toContain("401");
  });
});

describe("createDiscovery", () => {
  test("static plus kubernetes, combined; kubernetes mode needs a selector", async () => {
    const { createDiscovery } = await import("./create-discovery");
    const fake = startFakeKubeApi({ namespace: "ai", token: "t" });
    try {
      const dir = mkdtempSync(join(tmpdir(), "sa-"));
      writeFileSync(join(dir, "token"), "t");
      fake.upsert(slice("s1", [{ ip: "10.0.0.1", pod: "ms-0" }]));
      const api = createKubernetesApi({ server: fake.url, tokenPath: join(dir, "token") });
      const d = createDiscovery({ mode: "kubernetes", namespace: "ai", labelSelector: SELECTOR, portName: "rpc", static: [{ url: "http://vllm:8000/v1", kind: "openai" }] }, { api });
      await d.start();
      expect(d.current().map((b) => `${b.source}:${b.id}`)).toEqual(["static:vllm:8000", "kubernetes:ms-0"]);
      const seen: number[] = [];
      d.onChange((l) => seen.push(l.length));
      fake.upsert(slice("s1", [{ ip: "10.0.0.1", pod: "ms-0" }, { ip: "10.0.0.2", pod: "ms-1" }]));
      await until(d.current, (l) => l.length === 3);
      expect(seen.at(-1)).toBe(3);
      d.stop();
      expect(() => createDiscovery({ mode: "kubernetes", namespace: "ai" }, { api })).toThrow(/label selector/);
      expect(() => createDiscovery({ mode: "kubernetes", labelSelector: "a=b" }, { env: {} })).toThrow(/KUBERNETES_SERVICE_HOST/);
    } finally {
      fake.stop();
    }
  });
});
