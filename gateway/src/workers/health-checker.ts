/**
 * Active health checks: probes every backend (ejected ones too, so they can
 * return) and reports results to the pool. While any backend is unhealthy
 * the next round comes sooner (at most `retryMs` later), so a gateway started
 * next to a model server that is still loading becomes ready soon after the
 * server does. `start()` runs the first round at once and resolves when it
 * finished.
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

export function createHealthChecker(
  pool: BackendPool,
  o: { intervalMs: number; timeoutMs: number; retryMs?: number },
): HealthChecker {
  const retryMs = Math.min(o.retryMs ?? 500, o.intervalMs);
  let timer: ReturnType<typeof setTimeout> | undefined;
  let stopped = false;
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

  function schedule(): void {
    if (stopped) return;
    const delay = pool.members.every((m) => m.healthy) ? o.intervalMs : retryMs;
    timer = setTimeout(() => void checkNow().finally(schedule), delay);
    timer.unref?.();
  }

  return {
    async start() {
      stopped = false;
      await checkNow();
      schedule();
    },
    checkNow,
    stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
      timer = undefined;
    },
  };
}
