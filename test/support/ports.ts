/**
 * A free TCP port on loopback, for a process that must keep its port across
 * restarts (the gateway's static backend list names it).
 *
 * @example
 * const port = freePort();
 */
export function freePort(): number {
  const s = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  const port = s.port;
  s.stop(true);
  return port;
}

/** Polls `probe` every `everyMs` until it returns true or `timeoutMs` passes; returns whether it did. */
export async function waitFor(probe: () => boolean | Promise<boolean>, timeoutMs: number, everyMs = 20): Promise<boolean> {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    if (await probe()) return true;
    await Bun.sleep(everyMs);
  }
  return false;
}
