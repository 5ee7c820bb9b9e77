/**
 * Measured engine rates for load reports: exponential moving averages of
 * prefill tokens per second (over steps that prefilled) and decode steps per
 * second (over steps that decoded). The router's cost model reads them.
 *
 * @example
 * const t = createLoadTracker();
 * t.recordStep(0.05, 256, 4); // a 50 ms step: 256 prompt tokens, 4 decoding sequences
 * t.snapshot(counts).prefillTokensPerS; // ~5120 after the first sample
 */
export interface LoadCounts {
  running: number;
  waiting: number;
  queuedPrefillTokens: number;
  kvBlocksUsed: number;
  kvBlocksTotal: number;
  kvBlocksCached: number;
  maxQueue: number;
}

export interface LoadSnapshot extends LoadCounts {
  prefillTokensPerS: number;
  decodeStepsPerS: number;
  timestampMs: number;
  /** Steps run since start. */
  steps: number;
}

export interface LoadTracker {
  recordStep(seconds: number, prefillTokens: number, decodeSeqs: number): void;
  snapshot(counts: LoadCounts): LoadSnapshot;
}

export function createLoadTracker(alpha = 0.2): LoadTracker {
  let prefill = 0;
  let decode = 0;
  let steps = 0;
  const ema = (old: number, sample: number) => (old === 0 ? sample : old + alpha * (sample - old));
  return {
    recordStep(seconds, prefillTokens, decodeSeqs) {
      steps++;
      if (seconds <= 0) return;
      if (prefillTokens > 0) prefill = ema(prefill, prefillTokens / seconds);
      if (decodeSeqs > 0) decode = ema(decode, 1 / seconds);
    },
    snapshot(counts) {
      return { ...counts, prefillTokensPerS: prefill, decodeStepsPerS: decode, timestampMs: Date.now(), steps };
    },
  };
}
