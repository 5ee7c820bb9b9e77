/**
 * Sends generated HTTP cases to a gateway and judges every answer: a `4xx`
 * case must get a 4xx with OpenAI's error shape; a `not-5xx` case must not get
 * a 5xx (a 200 body is read to its end); no answer within `stuckMs` is a stuck
 * connection. Bounded by the case count and `deadlineMs`.
 *
 * @example
 * const report = await fuzzHttp(gw.url, cases, { concurrency: 8, stuckMs: 5000, deadlineMs: 60_000 });
 * expect(report.failures).toEqual([]);
 */
import type { HttpCase } from "./http-cases";

export interface Failure {
  index: number;
  category: string;
  what: string;
  status: number;
  problem: string;
  body: string;
}

export interface FuzzReport {
  sent: number;
  /** Per category: how many, and the statuses seen. */
  byCategory: Record<string, { sent: number; statuses: Record<string, number> }>;
  failures: Failure[];
  ms: number;
}

/** OpenAI's error shape: {"error": {"message": string, "type": string, "param": string|null, "code": string|null}}. */
export function isOpenAIError(body: unknown): boolean {
  if (typeof body !== "object" || body === null) return false;
  const e = (body as { error?: unknown }).error;
  if (typeof e !== "object" || e === null) return false;
  const { message, type, param, code } = e as Record<string, unknown>;
  return typeof message === "string" && message.length > 0 && typeof type === "string" && (param === null || typeof param === "string") && (code === null || typeof code === "string");
}

/** Anthropic's error shape (the Messages API's routes): {"type": "error", "error": {"type": string, "message": string}}. */
export function isAnthropicError(body: unknown): boolean {
  if (typeof body !== "object" || body === null || (body as { type?: unknown }).type !== "error") return false;
  const e = (body as { error?: unknown }).error;
  if (typeof e !== "object" || e === null) return false;
  const { message, type } = e as Record<string, unknown>;
  return typeof message === "string" && message.length > 0 && typeof type === "string";
}

async function judge(baseUrl: string, c: HttpCase, stuckMs: number): Promise<{ status: number; problem?: string; body: string }> {
  let status = 0;
  let text = "";
  try {
    const res = await fetch(`${baseUrl}${c.path}`, { method: c.method, headers: c.headers, body: c.body, signal: AbortSignal.timeout(stuckMs), decompress: false } as RequestInit);
    status = res.status;
    text = await res.text();
  } catch (err) {
    const stuck = err instanceof Error && (err.name === "TimeoutError" || err.name === "AbortError");
    return { status, problem: stuck ? `no complete answer within ${stuckMs} ms (stuck)` : `connection failed: ${String(err)}`, body: text };
  }
  if (status >= 500) return { status, problem: "5xx", body: text };
  if (c.expect === "4xx" && (status < 400 || status >= 500)) return { status, problem: `expected a 4xx, got ${status}`, body: text };
  if (status >= 400) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {}
    const anthropic = c.path.startsWith("/v1/messages");
    if (anthropic ? !isAnthropicError(parsed) : !isOpenAIError(parsed)) return { status, problem: `4xx without ${anthropic ? "Anthropic's" : "OpenAI's"} error shape`, body: text };
  }
  return { status, body: text };
}

export async function fuzzHttp(baseUrl: string, cases: readonly HttpCase[], o: { concurrency: number; stuckMs: number; deadlineMs: number }): Promise<FuzzReport> {
  const t0 = Date.now();
  const report: FuzzReport = { sent: 0, byCategory: {}, failures: [], ms: 0 };
  let next = 0;
  const worker = async () => {
    while (next < cases.length && Date.now() - t0 < o.deadlineMs) {
      const c = cases[next++]!;
      const r = await judge(baseUrl, c, o.stuckMs);
      report.sent++;
      const cat = (report.byCategory[c.category] ??= { sent: 0, statuses: {} });
      cat.sent++;
      cat.statuses[r.status] = (cat.statuses[r.status] ?? 0) + 1;
      if (r.problem) report.failures.push({ index: c.index, category: c.category, what: c.what, status: r.status, problem: r.problem, body: r.body.slice(0, 300) });
    }
  };
  await Promise.all(Array.from({ length: o.concurrency }, worker));
  report.ms = Date.now() - t0;
  return report;
}

/** Failures grouped by category, problem and the mutation (first 40 chars), with a count and one example. */
export function groupFailures(failures: readonly Failure[]): Array<{ key: string; count: number; example: Failure }> {
  const groups = new Map<string, { key: string; count: number; example: Failure }>();
  for (const f of failures) {
    const key = `${f.category} | ${f.problem} | ${f.status} | ${f.what.slice(0, 40)}`;
    const g = groups.get(key);
    if (g) g.count++;
    else groups.set(key, { key, count: 1, example: f });
  }
  return [...groups.values()].sort((a, b) => b.count - a.count);
}
