/**
 * Where a request's time goes before its first SSE chunk, for benchmarking the gateway's own
 * share of TTFT: with `DISPATCH_TTFT_MARKS=N` set, each stage of the request path calls
 * `ttftMark("stage")` (the record begins where Bun hands the request to the app), and every N requests the medians of the gaps between consecutive stages
 * go to stderr. Off (the default), `ttftMark` is a no-op on a constant.
 *
 * Marks go to the most recently begun request, so the figures are only meaningful at
 * concurrency 1 (bench/gateway/serve-overhead.ts --concurrency 1).
 *
 * @example
 * ttftBegin();           // Bun.serve's fetch
 * ttftMark("parsed");
 * ttftEnd("written");    // first chunk flushed: the record is complete
 */
const every = Number(process.env.DISPATCH_TTFT_MARKS) || 0;

let current: { names: string[]; times: number[] } | null = null;
const gaps = new Map<string, number[]>();
let done = 0;

export const ttftMarksOn = every > 0;

export function ttftBegin(): void {
  if (every > 0) current = { names: ["entry"], times: [performance.now()] };
}

export function ttftMark(name: string): void {
  if (current) {
    current.names.push(name);
    current.times.push(performance.now());
  }
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1] ?? 0;

export function ttftEnd(name: string): void {
  const r = current;
  if (!r) return;
  current = null;
  r.names.push(name);
  r.times.push(performance.now());
  for (let i = 1; i < r.names.length; i++) {
    const k = `${r.names[i - 1]}>${r.names[i]}`;
    let g = gaps.get(k);
    if (!g) gaps.set(k, (g = []));
    g.push((r.times[i]! - r.times[i - 1]!) * 1000);
  }
  const total = `total`;
  let t = gaps.get(total);
  if (!t) gaps.set(total, (t = []));
  t.push((r.times[r.times.length - 1]! - r.times[0]!) * 1000);
  if (++done % every === 0) {
    const parts = [...gaps].map(([k, v]) => `${k} ${median(v).toFixed(1)}`);
    process.stderr.write(`[ttft-marks] ${done} requests, median us: ${parts.join(", ")}\n`);
    gaps.clear();
  }
}
