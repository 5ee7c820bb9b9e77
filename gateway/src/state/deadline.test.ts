import { expect, test } from "bun:test";
import { DeadlineError, withDeadline } from "./deadline";

test("a call that outlives its deadline rejects with DeadlineError on time", async () => {
  const t0 = performance.now();
  const never = new Promise<number>(() => {});
  await expect(withDeadline(never, 5)).rejects.toBeInstanceOf(DeadlineError);
  expect(performance.now() - t0).toBeLessThan(200);
  expect(await withDeadline(Promise.resolve(7), 5)).toBe(7);
});
