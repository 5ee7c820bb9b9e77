/**
 * Measures capacity through the gateway: closed-loop load at rising
 * concurrency, a few seconds per step, until throughput stops growing by 5 %;
 * capacity is the best completed-requests-per-second seen.
 *
 * @example
 * const cap = await measureCapacity({ baseUrl, body, stepMs: 4000 });
 * cap.rps; cap.steps; // [{ concurrency, rps, errors }]
 */
import { runLoad } from "../../test/support/load";

export interface CapacityStep {
  concurrency: number;
  rps: number;
  errors: number;
}

export async function measureCapacity(o: { baseUrl: string; body: (n: number) => Record<string, unknown>; stepMs: number; maxConcurrency?: number }): Promise<{ rps: number; steps: CapacityStep[] }> {
  const steps: CapacityStep[] = [];
  let best = 0;
  for (let conc = 1; conc <= (o.maxConcurrency ?? 32); conc *= 2) {
    const t0 = performance.now();
    const outs = await runLoad({ baseUrl: o.baseUrl, concurrency: conc, durationMs: o.stepMs, maxRequests: 100_000, body: o.body, chatOptions: { stallMs: 30_000 } });
    const secs = (performance.now() - t0) / 1000;
    const ok = outs.filter((x) => x.kind === "ok").length;
    const rps = ok / secs;
    steps.push({ concurrency: conc, rps: Math.round(rps * 100) / 100, errors: outs.length - ok });
    if (rps < best * 1.05) {
      best = Math.max(best, rps);
      break;
    }
    best = rps;
  }
  return { rps: best, steps };
}
