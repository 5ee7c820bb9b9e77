/**
 * The WatchLoad stream: a report every `intervalMs` (default 100 ms), and one
 * at once when the load moves by a large step (the running + waiting count by
 * a quarter or more, at least 2, or KV use by 10% of the cache), at most every
 * 10 ms. Ends when `signal` aborts.
 *
 * @example
 * for await (const r of watchLoad(engine, 100, ctx.signal, toReport)) send(r);
 */
import type { Engine } from "../engine/engine";
import type { LoadSnapshot } from "../engine/load-tracker";

const DEFAULT_INTERVAL_MS = 100;
const MIN_GAP_MS = 10;

function bigChange(a: LoadSnapshot, b: LoadSnapshot): boolean {
  const qa = a.running + a.waiting;
  const qb = b.running + b.waiting;
  if (Math.abs(qa - qb) >= Math.max(2, Math.ceil(qa / 4))) return true;
  return Math.abs(a.kvBlocksUsed - b.kvBlocksUsed) >= Math.max(1, b.kvBlocksTotal / 10);
}

export async function* watchLoad<T>(engine: Engine, intervalMs: number, signal: AbortSignal, toReport: (l: LoadSnapshot) => T): AsyncGenerator<T> {
  const interval = Math.max(MIN_GAP_MS, intervalMs || DEFAULT_INTERVAL_MS);
  let wake: (() => void) | null = null;
  let last = engine.load();
  let lastSent = 0;
  const off = engine.onLoadChange(() => {
    if (wake && performance.now() - lastSent >= MIN_GAP_MS && bigChange(last, engine.load())) wake();
  });
  const onAbort = () => wake?.();
  signal.addEventListener("abort", onAbort);
  try {
    while (!signal.aborted) {
      last = engine.load();
      lastSent = performance.now();
      yield toReport(last);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, interval);
        wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      wake = null;
    }
  } finally {
    off();
    signal.removeEventListener("abort", onAbort);
  }
}
