/**
 * The one retry helper: run `attempt` until it succeeds, the error is not
 * retryable, attempts run out, or the client went away. Backoff doubles from
 * `backoffMs` up to `maxBackoffMs`. Callers make attempts retryable only
 * before the first token reached the client (see GatewayError.retryable).
 *
 * @example
 * const call = await withRetry((n) => pickAndOpen(n), { maxAttempts: 3, backoffMs: 20, maxBackoffMs: 200, signal });
 */
import { GatewayError } from "../errors";

export interface RetryOptions {
  maxAttempts: number;
  backoffMs: number;
  maxBackoffMs: number;
  signal: AbortSignal;
  onRetry?: (err: GatewayError, attempt: number) => void;
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (ms <= 0 || signal.aborted) return resolve();
    const done = () => {
      clearTimeout(t);
      signal.removeEventListener("abort", done);
      resolve();
    };
    const t = setTimeout(done, ms);
    signal.addEventListener("abort", done, { once: true });
  });
}

export async function withRetry<T>(attempt: (n: number) => Promise<T>, o: RetryOptions): Promise<T> {
  for (let n = 1; ; n++) {
    try {
      return await attempt(n);
    } catch (err) {
      if (!(err instanceof GatewayError) || !err.retryable || n >= o.maxAttempts || o.signal.aborted) throw err;
      o.onRetry?.(err, n);
      await sleep(Math.min(o.backoffMs * 2 ** (n - 1), o.maxBackoffMs), o.signal);
      if (o.signal.aborted) throw err;
    }
  }
}
