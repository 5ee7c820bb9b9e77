/**
 * Samples RSS and open file descriptors of named processes every `everyMs`
 * (from /proc) and fits a least-squares line per process and metric.
 *
 * @example
 * const s = createSampler({ gateway: gwPid, "ms-0": msPid }, 5000);
 * s.start(); ... ; s.stop();
 * s.summary(60_000); // per process: rss/fd first, last, max, slope per minute (after 60 s of warm-up)
 */
import { procStats, slope } from "../../test/support/proc-stats";

export interface Sample {
  t: number;
  pid: number;
  name: string;
  rssKiB: number;
  fds: number;
}

export interface ProcessSummary {
  name: string;
  samples: number;
  rssFirstMiB: number;
  rssLastMiB: number;
  rssMaxMiB: number;
  /** Least-squares slope of RSS after warm-up, MiB per minute. */
  rssSlopeMiBPerMin: number;
  fdsFirst: number;
  fdsLast: number;
  fdsMax: number;
  /** Least-squares slope of open fds after warm-up, per minute. */
  fdSlopePerMin: number;
}

export function createSampler(pids: () => Record<string, number>, everyMs: number) {
  const samples: Sample[] = [];
  const t0 = performance.now();
  let timer: ReturnType<typeof setInterval> | undefined;
  const take = () => {
    const t = (performance.now() - t0) / 1000;
    for (const [name, pid] of Object.entries(pids())) {
      const s = procStats(pid);
      if (s) samples.push({ t, pid, name, ...s });
    }
  };
  return {
    samples,
    start() {
      take();
      timer = setInterval(take, everyMs);
    },
    stop() {
      clearInterval(timer);
      take();
    },
    summary(warmupS: number): ProcessSummary[] {
      const names = [...new Set(samples.map((s) => s.name))];
      const r2 = (x: number) => Math.round(x * 100) / 100;
      return names.map((name) => {
        const all = samples.filter((s) => s.name === name);
        const late = all.filter((s) => s.t >= warmupS);
        const fit = late.length >= 3 ? late : all;
        return {
          name,
          samples: all.length,
          rssFirstMiB: r2(all[0]!.rssKiB / 1024),
          rssLastMiB: r2(all.at(-1)!.rssKiB / 1024),
          rssMaxMiB: r2(Math.max(...all.map((s) => s.rssKiB)) / 1024),
          rssSlopeMiBPerMin: r2((slope(fit.map((s) => [s.t, s.rssKiB / 1024])) * 60)),
          fdsFirst: all[0]!.fds,
          fdsLast: all.at(-1)!.fds,
          fdsMax: Math.max(...all.map((s) => s.fds)),
          fdSlopePerMin: r2(slope(fit.map((s) => [s.t, s.fds])) * 60),
        };
      });
    },
  };
}
