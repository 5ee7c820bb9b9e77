/**
 * Open-loop load at a fixed arrival rate for a bounded time: one request every
 * 1/rate s whatever the answers do (so a slow server shows as queueing, not as
 * a lower offered load). In-flight requests are capped; an arrival over the
 * cap is counted as `shed` (a client-side loss, reported as such).
 *
 * @example
 * const r = await openLoop({ baseUrl, rate: 5, durationMs: 60_000, maxInFlight: 64, body });
 */
import { type ChatOutcome, chat } from "../../test/support/sse-client";

export interface OpenLoopResult {
  sent: number;
  shed: number;
  outcomes: ChatOutcome[];
}

export async function openLoop(o: { baseUrl: string; rate: number; durationMs: number; maxInFlight: number; body: (n: number) => Record<string, unknown> }): Promise<OpenLoopResult> {
  const outcomes: ChatOutcome[] = [];
  const pending = new Set<Promise<void>>();
  const t0 = performance.now();
  const interval = 1000 / o.rate;
  let sent = 0;
  let shed = 0;
  for (let n = 0; ; n++) {
    const due = t0 + n * interval;
    if (due - t0 >= o.durationMs) break;
    const wait = due - performance.now();
    if (wait > 0) await Bun.sleep(wait);
    if (pending.size >= o.maxInFlight) {
      shed++;
      continue;
    }
    sent++;
    const p: Promise<void> = chat(o.baseUrl, o.body(n), { stallMs: 30_000 }).then((r) => {
      outcomes.push(r);
      pending.delete(p);
    });
    pending.add(p);
  }
  await Promise.all(pending);
  return { sent, shed, outcomes };
}
