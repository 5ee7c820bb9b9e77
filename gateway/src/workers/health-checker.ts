/**
 * Active health checks: probes every backend at an interval (ejected ones
 * too, so they can return) and reports results to the pool. `start()` runs
 * the first round at once and resolves when it finished, so a gateway is
 * ready as soon as its backends are.
 *
 * @example
 * const hc = createHealthChecker(pool, { intervalMs: 5000, timeoutMs: 2000 });
 * await hc.start();
 */
import type { BackendPool } from "./pool";

export interface HealthChecker {
  start(): Promise<void>;
  /** Probe everything now (tests, admin). */
  checkNow(): Promise<void>;
  stop(): void;
}

export function createHealthChecker(pool: BackendPool, o: { intervalMs: number; timeoutMs: number }): HealthChecker {
  let timer: ReturnType<typeof setInterval> | undefined;
  let running: Promise<void> | null = null;

  async function probeAll(): Promise<void> {
    await Promise.all(
      pool.members.map(async (m) => {
        try {
          await m.backend.probe(AbortSignal.timeout(o.timeoutMs));
          pool.reportSuccess(m.backend.id);
        } catch (err) {
          pool.reportFailure(m.backend.id, (err as Error).message);
        }
      }),
    );
  }

  function checkNow(): Promise<void> {
    running ??= probeAll().finally(() => {
      running = null;
    });
    return running;
  }

  return {
    async start() {
      timer = setInterval(() => void checkNow(), o.intervalMs);
      timer.unref?.();
      await checkNow();
    },
    checkNow,
    stop() {
      if (timer) clearInterval(timer);
      timer = undefined;
    },
  };
}
