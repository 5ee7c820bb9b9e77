/**
 * Resident memory and open file descriptors of a process, read from /proc
 * (Linux only), and the least-squares slope of a series: the soak's figures.
 *
 * @example
 * const s = procStats(pid);          // { rssKiB: 81234, fds: 23 } or undefined if gone
 * slope([[0, 100], [60, 106]]);      // 0.1 (units of y per unit of x)
 */
import { readdirSync, readFileSync } from "node:fs";

export interface ProcStats {
  rssKiB: number;
  fds: number;
}

export function procStats(pid: number): ProcStats | undefined {
  try {
    const status = readFileSync(`/proc/${pid}/status`, "utf8");
    const m = status.match(/^VmRSS:\s+(\d+)\s+kB/m);
    return { rssKiB: m ? Number(m[1]) : 0, fds: readdirSync(`/proc/${pid}/fd`).length };
  } catch {
    return undefined;
  }
}

/** Ordinary least-squares slope of y on x; 0 for fewer than two distinct x. */
export function slope(points: ReadonlyArray<readonly [number, number]>): number {
  const n = points.length;
  if (n < 2) return 0;
  let sx = 0;
  let sy = 0;
  for (const [x, y] of points) {
    sx += x;
    sy += y;
  }
  const mx = sx / n;
  const my = sy / n;
  let num = 0;
  let den = 0;
  for (const [x, y] of points) {
    num += (x - mx) * (y - my);
    den += (x - mx) ** 2;
  }
  return den === 0 ? 0 : num / den;
}
