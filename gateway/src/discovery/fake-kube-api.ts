/**
 * Test helper: a tiny Kubernetes API server on loopback that serves
 * EndpointSlice list and watch (newline-delimited JSON) for one namespace, with
 * equality label selectors, bearer-token checks, and knobs to expire watches
 * (410) or fail requests. Only for tests.
 */
import type { Server } from "bun";
import type { EndpointSlice } from "./endpoint-slices";

type Slice = EndpointSlice & { metadata: { name: string; labels?: Record<string, string>; resourceVersion?: string } };

export interface FakeKubeApi {
  readonly url: string;
  readonly requests: string[];
  upsert(slice: Slice): void;
  remove(name: string): void;
  /** Ends open watches with an ERROR 410 event (client must relist). */
  expireWatches(): void;
  /** The next `n` requests fail with `status`. */
  failNext(n: number, status: number): void;
  openWatches(): number;
  stop(): void;
}

/** `token` undefined: no authentication (like `kubectl proxy`). */
export function startFakeKubeApi(o: { namespace: string; token?: string }): FakeKubeApi {
  let rv = 100;
  const slices = new Map<string, Slice>();
  const watchers = new Set<{ selector: Record<string, string>; send: (line: string) => void; close: () => void }>();
  const requests: string[] = [];
  // Every change with its resourceVersion: a watch from version V replays what came after V, as the real API server does.
  const history: { rv: number; type: string; object: Slice }[] = [];
  let failures = 0;
  let failStatus = 500;

  const parseSelector = (s: string | null) =>
    Object.fromEntries((s ?? "").split(",").filter(Boolean).map((kv) => kv.split("=") as [string, string]));
  const matches = (sel: Record<string, string>, s: Slice) => Object.entries(sel).every(([k, v]) => s.metadata.labels?.[k] === v);
  const broadcast = (type: string, s: Slice) => {
    history.push({ rv, type, object: s });
    for (const w of watchers) if (matches(w.selector, s)) w.send(JSON.stringify({ type, object: s }) + "\n");
  };

  const server: Server<unknown> = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch(req) {
      const url = new URL(req.url);
      requests.push(url.pathname + url.search);
      if (o.token !== undefined && req.headers.get("authorization") !== `Bearer ${o.token}`) return Response.json({ kind: "Status", code: 401, message: "Unauthorized" }, { status: 401 });
      if (failures > 0) {
        failures--;
        return Response.json({ kind: "Status", code: failStatus, message: "injected failure" }, { status: failStatus });
      }
      if (url.pathname !== `/apis/discovery.k8s.io/v1/namespaces/${o.namespace}/endpointslices`)
        return Response.json({ kind: "Status", code: 404, message: "not found" }, { status: 404 });
      const selector = parseSelector(url.searchParams.get("labelSelector"));
      if (url.searchParams.get("watch") !== "1") {
        return Response.json({ kind: "EndpointSliceList", metadata: { resourceVersion: String(rv) }, items: [...slices.values()].filter((s) => matches(selector, s)) });
      }
      let ctrl!: ReadableStreamDefaultController<Uint8Array>;
      const enc = new TextEncoder();
      const w = {
        selector,
        send: (line: string) => ctrl.enqueue(enc.encode(line)),
        close: () => {
          watchers.delete(w);
          try {
            ctrl.close();
          } catch {}
        },
      };
      const body = new ReadableStream<Uint8Array>({
        start(c) {
          ctrl = c;
          watchers.add(w);
          const from = Number(url.searchParams.get("resourceVersion") ?? rv);
          for (const h of history) if (h.rv > from && matches(selector, h.object)) c.enqueue(enc.encode(JSON.stringify({ type: h.type, object: h.object }) + "\n"));
          c.enqueue(enc.encode(JSON.stringify({ type: "BOOKMARK", object: { metadata: { name: "", resourceVersion: String(rv) } } }) + "\n"));
        },
        cancel() {
          watchers.delete(w);
        },
      });
      req.signal.addEventListener("abort", () => watchers.delete(w));
      return new Response(body, { headers: { "content-type": "application/json" } });
    },
  });

  return {
    url: `http://127.0.0.1:${server.port}`,
    requests,
    upsert(slice) {
      const type = slices.has(slice.metadata.name) ? "MODIFIED" : "ADDED";
      const s = structuredClone(slice);
      s.metadata.resourceVersion = String(++rv);
      slices.set(s.metadata.name, s);
      broadcast(type, s);
    },
    remove(name) {
      const s = slices.get(name);
      if (!s) return;
      slices.delete(name);
      s.metadata.resourceVersion = String(++rv);
      broadcast("DELETED", s);
    },
    expireWatches() {
      for (const w of [...watchers]) {
        w.send(JSON.stringify({ type: "ERROR", object: { kind: "Status", code: 410, message: "too old resource version" } }) + "\n");
        w.close();
      }
    },
    failNext(n, status) {
      failures = n;
      failStatus = status;
    },
    openWatches: () => watchers.size,
    stop() {
      for (const w of [...watchers]) w.close();
      server.stop(true);
    },
  };
}
