import { expect, test } from "bun:test";
import { badGateway, badRequest } from "../errors";
import { withRetry } from "./retry";

const opts = { maxAttempts: 3, backoffMs: 10, maxBackoffMs: 15, signal: new AbortController().signal };

test("retries retryable errors with backoff, then succeeds", async () => {
  let n = 0;
  const t0 = performance.now();
  const v = await withRetry(async () => {
    if (++n < 3) throw badGateway("boom");
    return "ok";
  }, opts);
  expect(v).toBe("ok");
  expect(n).toBe(3);
  expect(performance.now() - t0).toBeGreaterThanOrEqual(10 + 15 - 2);
});

test("stops at maxAttempts and rethrows the last error", async () => {
  let n = 0;
  await expect(withRetry(async () => { n++; throw badGateway(`fail ${n}`); }, opts)).rejects.toThrow("fail 3");
  expect(n).toBe(3);
});

test("never retries a non-retryable error", async () => {
  let n = 0;
  await expect(withRetry(async () => { n++; throw badRequest("bad"); }, opts)).rejects.toThrow("bad");
  expect(n).toBe(1);
});

test("an aborted signal stops retrying at once", async () => {
  const ac = new AbortController();
  let n = 0;
  const p = withRetry(async () => { n++; ac.abort(); throw badGateway("x"); }, { ...opts, signal: ac.signal });
  await expect(p).rejects.toThrow("x");
  expect(n).toBe(1);
});
