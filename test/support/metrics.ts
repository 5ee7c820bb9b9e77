/**
 * Reads a process's own counters from its Prometheus `/metrics` text: every
 * sample as `name{labels}` -> value (labels as printed, sorted by the exporter).
 *
 * @example
 * const m = await scrapeMetrics(ms.url);
 * m.get("dispatch_ms_kv_blocks_used");                       // 0
 * m.get('dispatch_ms_requests_total{outcome="cancelled"}');  // 3
 */
export type Samples = Map<string, number>;

export function parsePrometheus(text: string): Samples {
  const out: Samples = new Map();
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const cut = line.lastIndexOf(" ");
    if (cut <= 0) continue;
    const value = Number(line.slice(cut + 1));
    if (!Number.isNaN(value)) out.set(line.slice(0, cut), value);
  }
  return out;
}

export async function scrapeMetrics(baseUrl: string, timeoutMs = 2000): Promise<Samples> {
  const res = await fetch(`${baseUrl}/metrics`, { signal: AbortSignal.timeout(timeoutMs) });
  return parsePrometheus(await res.text());
}

/** Sum of every sample whose name (before `{`) is `name` and whose label text contains `labelPart`. */
export function sumOf(samples: Samples, name: string, labelPart = ""): number {
  let total = 0;
  for (const [k, v] of samples) {
    const base = k.includes("{") ? k.slice(0, k.indexOf("{")) : k;
    if (base === name && k.includes(labelPart)) total += v;
  }
  return total;
}
