/**
 * Sends generated Connect cases to a model server and judges each answer.
 * Reads at most the first response message (then cancels, so a valid stream
 * such as WatchLoad does not run on). An answer is one of: served (a data
 * message arrived), a Connect error code (unary JSON body, or the end-stream
 * message of a stream), or a bare HTTP status. Failures: a 5xx other than
 * Connect's own mapping of a non-internal code, the codes `internal`,
 * `unknown` or `data_loss`, an `error` case that was served, or no answer
 * within `stuckMs`.
 *
 * @example
 * const r = await fuzzConnect(ms.url, cases, { concurrency: 6, stuckMs: 5000 });
 */
import type { ConnectCase } from "./connect-cases";

export interface ConnectAnswer {
  status: number;
  code: string | null;
  message?: string;
  served: boolean;
}

export interface ConnectFailure {
  index: number;
  category: string;
  what: string;
  answer: ConnectAnswer | null;
  problem: string;
}

export interface ConnectReport {
  sent: number;
  /** "category: code-or-status" -> count. */
  answers: Record<string, number>;
  failures: ConnectFailure[];
  /** `internal` answers produced by the Connect library's own decoding (see above). */
  libraryInternal: number;
  ms: number;
}

const LIBRARY_INTERNAL = /^(\[internal\] )?(parse binary|received compressed envelope|invalid envelope)/;

const BAD_CODES = new Set(["internal", "unknown", "data_loss"]);

/**
 * Reads envelopes until a data message or the end-stream message. A watch
 * stream with nothing to report stays open and quiet: accepted after `quietMs`.
 */
async function readStream(res: Response, quietMs: number): Promise<{ served: boolean; code: string | null; message?: string }> {
  const reader = res.body!.getReader();
  let buf = new Uint8Array(0);
  const quiet = Symbol("quiet");
  try {
    for (;;) {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const r = await Promise.race([reader.read(), new Promise<typeof quiet>((resolve) => (timer = setTimeout(() => resolve(quiet), quietMs)))]);
      clearTimeout(timer);
      if (r === quiet) return { served: true, code: null };
      const { value, done } = r;
      if (done) return { served: false, code: null };
      const next = new Uint8Array(buf.length + value.length);
      next.set(buf);
      next.set(value, buf.length);
      buf = next;
      while (buf.length >= 5) {
        const flags = buf[0]!;
        const len = new DataView(buf.buffer, buf.byteOffset).getUint32(1);
        if (buf.length < 5 + len) break;
        const payload = buf.subarray(5, 5 + len);
        buf = buf.subarray(5 + len);
        if (flags & 0x02) {
          const end = JSON.parse(new TextDecoder().decode(payload)) as { error?: { code?: string; message?: string } };
          return { served: false, code: end.error?.code ?? null, message: end.error?.message };
        }
        return { served: true, code: null };
      }
    }
  } finally {
    void reader.cancel().catch(() => {});
  }
}

async function send(baseUrl: string, c: ConnectCase, stuckMs: number): Promise<ConnectAnswer> {
  const ctl = new AbortController();
  const t = setTimeout(() => ctl.abort(), stuckMs);
  try {
    const pending = fetch(`${baseUrl}${c.path}`, { method: c.method, headers: c.headers, body: c.body, signal: ctl.signal });
    // A watch stream with nothing to report sends no headers until its first message: quiet is fine.
    const res = c.expect === "any" && /\/Watch[A-Za-z]+$/.test(c.path) ? await Promise.race([pending, Bun.sleep(400).then(() => null)]) : await pending;
    if (res === null) return { status: 200, code: null, served: true };
    const ct = res.headers.get("content-type") ?? "";
    if (res.status === 200 && ct.startsWith("application/connect+")) return { status: 200, ...(await readStream(res, 400)) };
    const text = await res.text();
    let code: string | null = null;
    let message: string | undefined;
    try {
      ({ code = null, message } = JSON.parse(text) as { code?: string; message?: string });
    } catch {}
    return { status: res.status, code, message, served: res.status === 200 };
  } finally {
    clearTimeout(t);
    ctl.abort();
  }
}

export async function fuzzConnect(baseUrl: string, cases: readonly ConnectCase[], o: { concurrency: number; stuckMs: number; deadlineMs?: number }): Promise<ConnectReport> {
  const t0 = Date.now();
  const report: ConnectReport = { sent: 0, answers: {}, failures: [], libraryInternal: 0, ms: 0 };
  let next = 0;
  const worker = async () => {
    while (next < cases.length && Date.now() - t0 < (o.deadlineMs ?? 120_000)) {
      const c = cases[next++]!;
      report.sent++;
      let a: ConnectAnswer | null = null;
      let problem: string | undefined;
      try {
        a = await send(baseUrl, c, o.stuckMs);
        const library = a.code === "internal" && LIBRARY_INTERNAL.test(a.message ?? "");
        if (library) report.libraryInternal++;
        else if (a.code && BAD_CODES.has(a.code)) problem = `Connect code ${a.code}: ${a.message ?? ""}`;
        else if (a.status >= 500 && !(a.status === 501 && a.code === "unimplemented")) problem = `HTTP ${a.status}`;
        else if (c.expect === "error" && a.served) problem = "served a request that must be refused";
        else if (a.status === 200 && !a.served && !a.code) problem = "stream ended with neither a message nor an error";
      } catch (err) {
        problem = err instanceof Error && err.name === "AbortError" ? `no answer within ${o.stuckMs} ms (stuck)` : `connection failed: ${String(err)}`;
      }
      const key = `${c.category}: ${a ? (a.served ? "served" : (a.code ?? `http ${a.status}`)) : "none"}`;
      report.answers[key] = (report.answers[key] ?? 0) + 1;
      if (problem) report.failures.push({ index: c.index, category: c.category, what: c.what, answer: a, problem });
    }
  };
  await Promise.all(Array.from({ length: o.concurrency }, worker));
  report.ms = Date.now() - t0;
  return report;
}
