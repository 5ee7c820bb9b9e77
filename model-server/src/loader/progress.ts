/**
 * Load progress: a one-line bar on a terminal (stderr is a TTY), and a
 * callback with a short text for whoever reports readiness (health/loading).
 * Prints nothing when stderr is not a terminal, so logs stay clean.
 *
 * @example
 *   const p = createProgress({ total: bytes, label: "loading weights" });
 *   p.advance(n); p.done();
 */
export interface Progress {
  advance(n: number): void;
  done(): void;
}

export interface ProgressOptions {
  total: number;
  label: string;
  onProgress?: (message: string) => void;
  /** Defaults to process.stderr.isTTY. */
  tty?: boolean;
}

export function createProgress(o: ProgressOptions): Progress {
  const tty = o.tty ?? Boolean(process.stderr.isTTY);
  let current = 0;
  let lastPct = -1;
  const render = () => {
    const pct = o.total > 0 ? Math.floor((100 * current) / o.total) : 100;
    if (pct === lastPct) return;
    lastPct = pct;
    const msg = `${o.label} ${pct}% (${(current / 1048576).toFixed(1)}/${(o.total / 1048576).toFixed(1)} MiB)`;
    o.onProgress?.(msg);
    if (tty) {
      const width = 30;
      const filled = Math.round((width * pct) / 100);
      process.stderr.write(`\r${o.label} [${"#".repeat(filled)}${".".repeat(width - filled)}] ${pct}%  `);
    }
  };
  return {
    advance(n) {
      current = Math.min(o.total, current + n);
      render();
    },
    done() {
      current = o.total;
      render();
      if (tty) process.stderr.write("\n");
    },
  };
}
