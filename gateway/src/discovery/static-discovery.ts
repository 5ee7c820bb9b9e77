/**
 * Discovery from a fixed list (config or command line), e.g. existing vLLM /
 * SGLang servers outside the cluster.
 *
 * @example
 * const d = createStaticDiscovery([{ url: "http://10.0.0.5:8000", kind: "openai" }]);
 * await d.start(); d.current(); // [{ id: "10.0.0.5:8000", url: ..., kind: "openai", source: "static" }]
 */
import type { DiscoveredBackend, Discovery } from "./discovery";

export function createStaticDiscovery(entries: { url: string; kind?: "dispatch" | "openai"; id?: string }[]): Discovery {
  const list: DiscoveredBackend[] = entries.map((e, i) => {
    let u: URL;
    try {
      u = new URL(e.url);
    } catch {
      throw new Error(`static backend ${i}: not a URL: ${JSON.stringify(e.url)}`);
    }
    if (u.protocol !== "http:" && u.protocol !== "https:") throw new Error(`static backend ${i}: only http(s) URLs, got ${e.url}`);
    return { id: e.id ?? u.host, url: e.url.replace(/\/+$/, ""), kind: e.kind ?? "dispatch", source: "static" };
  });
  const ids = new Set<string>();
  for (const b of list) {
    if (ids.has(b.id)) throw new Error(`static backends: duplicate id ${b.id}`);
    ids.add(b.id);
  }
  return {
    source: "static",
    start: async () => {},
    stop() {},
    current: () => list.slice(),
    onChange: () => () => {},
  };
}
