/**
 * The serving benchmark's workload, as `vllm bench serve` builds it: N prompts of random token
 * ids of a set length, a set output length (EOS ignored), and arrival times — all at once
 * (rate Infinity) or a Poisson process at `rate` requests/s. Seeded and pure.
 *
 * @example
 *   const w = buildWorkload({ numPrompts: 64, inputLen: 512, outputLen: 256, rate: Infinity, vocab: 151936, seed: 0 });
 *   w.requests[0].prompt.length;   // 512
 */
import { createSeededRand } from "@dispatch/common/src/seeded-rand";

export interface WorkloadOptions {
  numPrompts: number;
  inputLen: number;
  outputLen: number;
  /** Requests per second (Poisson arrivals); Infinity sends all at t = 0. */
  rate: number;
  /** Token ids are drawn from [lowId, vocab). */
  vocab: number;
  lowId?: number;
  seed: number;
}

export interface BenchRequest {
  index: number;
  prompt: number[];
  outputLen: number;
  /** Seconds after the start at which to send it. */
  at: number;
}

export interface Workload {
  requests: BenchRequest[];
}

export function buildWorkload(o: WorkloadOptions): Workload {
  if (!(o.numPrompts > 0 && o.inputLen > 0 && o.outputLen > 0)) throw new RangeError("numPrompts, inputLen and outputLen must be positive");
  if (!(o.rate > 0)) throw new RangeError(`rate must be positive (Infinity for all at once), got ${o.rate}`);
  const low = o.lowId ?? 0;
  if (o.vocab <= low) throw new RangeError(`vocab ${o.vocab} leaves no ids above ${low}`);
  const rng = createSeededRand(o.seed);
  let t = 0;
  const requests: BenchRequest[] = [];
  for (let i = 0; i < o.numPrompts; i++) {
    const prompt = Array.from({ length: o.inputLen }, () => low + Math.floor(rng() * (o.vocab - low)));
    requests.push({ index: i, prompt, outputLen: o.outputLen, at: t });
    if (Number.isFinite(o.rate)) t += -Math.log(1 - rng()) / o.rate;
  }
  return { requests };
}
