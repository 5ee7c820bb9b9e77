/**
 * The GPU soak's verdict (device-soak.ts): what every request got against what it must get
 * (soak-mix.ts), and the model server's state once the traffic stopped. Pure.
 *
 * A soak fails on any of: a request past its time limit (hung); a valid request that did not
 * complete (status, error, no finish reason, a token count past max_tokens, an `ignore_eos`
 * request short of max_tokens, a token-id prompt whose usage counts other than its length); a refused request with the wrong status or not in OpenAI's error
 * shape; a cancelled stream that errored; a server that did not drain (sequences running or
 * waiting, KV blocks still held by sequences), is not ready, or exited; greedy probes before and
 * after the traffic that differ.
 *
 * @example
 *   const v = soakVerdict({ requests, records, drained: { running: 0, waiting: 0, kvBlocksUsed: 0, ready: true, serverExited: false } });
 *   v.ok;         // true
 *   v.failures;   // ["#12 stream greedy: HTTP 500 ..."] when not
 */
import type { SoakRecord } from "./soak-client";
import type { SoakKind, SoakRequest } from "./soak-mix";

export interface DrainState {
  running: number;
  waiting: number;
  /** KV blocks held by sequences (the prefix cache's own blocks are not counted). */
  kvBlocksUsed: number;
  /** GET /readyz answered 200. */
  ready: boolean;
  serverExited: boolean;
}

export interface SoakVerdictInput {
  requests: SoakRequest[];
  records: SoakRecord[];
  drained: DrainState;
  /** The same greedy request alone before and after the traffic: its texts. */
  probe?: { before: string; after: string };
}

export interface SoakVerdict {
  ok: boolean;
  failures: string[];
  /** Per kind: sent, and how each ended. */
  counts: Record<SoakKind, { sent: number; completed: number; cancelled: number; refused: number; failed: number }>;
}

/** Every way one record can be wrong, as messages (empty: it is right). */
export function checkRecord(req: SoakRequest, rec: SoakRecord): string[] {
  const at = `#${req.index} ${req.label}`;
  if (rec.timedOut) return [`${at}: no end within the time limit (hung)`];
  if (req.kind === "invalid") {
    const out: string[] = [];
    if (rec.status !== req.expectStatus) out.push(`${at}: HTTP ${rec.status}, expected ${req.expectStatus}${rec.error ? ` (${rec.error.slice(0, 120)})` : ""}`);
    if (rec.errorShapeOk !== true) out.push(`${at}: the error body is not in OpenAI's shape`);
    return out;
  }
  if (rec.status !== 200) return [`${at}: HTTP ${rec.status}${rec.error ? `: ${rec.error.slice(0, 200)}` : ""}`];
  if (rec.error) return [`${at}: ${rec.error.slice(0, 200)}`];
  if (rec.cancelled) return [];
  const out: string[] = [];
  const choices = req.choices ?? 1;
  for (let i = 0; i < choices; i++) {
    const f = choices === 1 ? rec.finishReason : rec.finishes[i];
    if (f !== "stop" && f !== "length") out.push(`${at}: ${choices > 1 ? `choice ${i}: ` : ""}finish reason ${f ?? "missing"}`);
  }
  if (req.json && rec.finishReason === "stop") {
    let ok = false;
    try {
      const v = JSON.parse(rec.texts[0] ?? rec.text);
      ok = typeof v === "object" && v !== null && !Array.isArray(v);
    } catch {}
    if (!ok) out.push(`${at}: JSON mode finished "stop" with text that is not one JSON object: ${JSON.stringify((rec.texts[0] ?? rec.text).slice(0, 80))}`);
  }
  if (rec.outputTokens === undefined) out.push(`${at}: no usage`);
  else {
    const max = (req.maxTokens ?? Infinity) * choices;
    if (rec.outputTokens > max) out.push(`${at}: ${rec.outputTokens} tokens, max_tokens ${max}`);
    if (req.exactLength && (rec.outputTokens !== max || rec.finishReason !== "length")) out.push(`${at}: ignore_eos: ${rec.outputTokens} tokens (${rec.finishReason}), expected exactly ${max} (length)`);
    if (rec.outputTokens === 0 && rec.finishReason !== "stop") out.push(`${at}: no tokens and finish ${rec.finishReason}`);
    if (req.promptTokens !== undefined && rec.promptTokens !== req.promptTokens) out.push(`${at}: usage.prompt_tokens ${rec.promptTokens ?? "missing"}, the prompt has ${req.promptTokens}`);
  }
  return out;
}

export function soakVerdict(i: SoakVerdictInput): SoakVerdict {
  const failures: string[] = [];
  const kinds: SoakKind[] = ["stream", "cancel", "plain", "chat", "invalid"];
  const counts = Object.fromEntries(kinds.map((k) => [k, { sent: 0, completed: 0, cancelled: 0, refused: 0, failed: 0 }])) as SoakVerdict["counts"];
  const byIndex = new Map(i.records.map((r) => [r.index, r]));
  for (const req of i.requests) {
    const c = counts[req.kind];
    c.sent++;
    const rec = byIndex.get(req.index);
    if (!rec) {
      failures.push(`#${req.index} ${req.label}: no record (never finished)`);
      c.failed++;
      continue;
    }
    const wrong = checkRecord(req, rec);
    failures.push(...wrong);
    if (wrong.length) c.failed++;
    else if (req.kind === "invalid") c.refused++;
    else if (rec.cancelled) c.cancelled++;
    else c.completed++;
  }
  const d = i.drained;
  if (d.serverExited) failures.push("the model server exited");
  if (d.running !== 0 || d.waiting !== 0) failures.push(`after the traffic: ${d.running} sequences running, ${d.waiting} waiting`);
  if (d.kvBlocksUsed !== 0) failures.push(`after the traffic: ${d.kvBlocksUsed} KV blocks still held by sequences (leaked)`);
  if (!d.ready) failures.push("after the traffic: /readyz not 200");
  if (i.probe && i.probe.before !== i.probe.after) failures.push(`the greedy probe changed: ${JSON.stringify(i.probe.before.slice(0, 60))} before, ${JSON.stringify(i.probe.after.slice(0, 60))} after`);
  return { ok: failures.length === 0, failures, counts };
}
