/**
 * The client-abort pattern of the cancellation tests: read a streamed
 * completion up to its n-th chunk, abort it there, then wait (bounded) for the
 * backend to see the cancel. The tests assert on what the fakes recorded.
 *
 * @example
 * const stream = await t.client.chat.completions.create({ model, messages, stream: true });
 * const abortedAt = await abortAtChunk(stream, 4);
 * await waitUntil(() => fake.cancels.length > 0, 1000);
 * expect(fake.cancels[0]! - abortedAt).toBeLessThan(100);
 */

/** Reads chunks until the n-th, aborts the stream; returns when (performance.now()) it aborted, 0 if it ended first. */
export async function abortAtChunk(stream: AsyncIterable<unknown> & { controller: AbortController }, n: number): Promise<number> {
  let seen = 0;
  for await (const _ of stream) {
    if (++seen === n) {
      const abortedAt = performance.now();
      stream.controller.abort();
      return abortedAt;
    }
  }
  return 0;
}

/** Polls `done` every 2 ms until it holds or `timeoutMs` passes; the caller asserts on the outcome. */
export async function waitUntil(done: () => boolean, timeoutMs: number): Promise<void> {
  const until = performance.now() + timeoutMs;
  while (!done() && performance.now() < until) await Bun.sleep(2);
}
