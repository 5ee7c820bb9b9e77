/**
 * OpenAI's Batch API on the gateway: a batch runs its input file's requests through the gateway's own routes (`send`:
 * the app itself, so routing, failover, limits and every backend kind apply), at most `concurrency` at a time, and
 * writes what came back, as it comes, to an output file (2xx answers) and an error file (the rest), in the order
 * they finish (lines match by custom_id). Its record
 * moves validating -> in_progress -> finalizing -> completed, or failed (the input did not validate), cancelling ->
 * cancelled, expired (past its 24 h window: what finished is kept). A request answered 429 or 503 (limits, no
 * server) is tried again later, up to `retryForMs`. Records live in memory, owned like files (file-store.ts).
 *
 * @example
 * const batches = createBatchService({ files, send, concurrency: 16, maxRequests: 50_000 });
 * const b = await batches.create(owner, { input_file_id: f.id, endpoint: "/v1/chat/completions", completion_window: "24h" });
 */
import { badRequest, GatewayError } from "../errors";
import { isObject, type Json } from "../openai/fields";
import { newItemId, randomId } from "../responses/items";
import { BATCH_ENDPOINTS, type BatchLine, parseBatchLines } from "./batch-lines";
import type { FileStore } from "./file-store";

export interface SendResult {
  status: number;
  requestId: string | null;
  body: unknown;
  /** Seconds the server asked to wait (429 / 503). */
  retryAfterS?: number;
}
/** Sends one line to `endpoint` as `owner` (the batch's creator). */
export type Send = (line: BatchLine, endpoint: string, signal: AbortSignal, owner: string) => Promise<SendResult>;

export type BatchStatus = "validating" | "failed" | "in_progress" | "finalizing" | "completed" | "expired" | "cancelling" | "cancelled";

export interface BatchObject {
  id: string;
  object: "batch";
  endpoint: string;
  errors: { object: "list"; data: { code: string; message: string; param: string | null; line: number | null }[] } | null;
  input_file_id: string;
  completion_window: string;
  status: BatchStatus;
  output_file_id: string | null;
  error_file_id: string | null;
  created_at: number;
  in_progress_at: number | null;
  expires_at: number;
  finalizing_at: number | null;
  completed_at: number | null;
  failed_at: number | null;
  expired_at: number | null;
  cancelling_at: number | null;
  cancelled_at: number | null;
  request_counts: { total: number; completed: number; failed: number };
  metadata: Record<string, string> | null;
}

export interface BatchService {
  create(owner: string, body: Json): Promise<BatchObject>;
  get(id: string, owner: string): BatchObject | undefined;
  /** `owner`'s batches, newest first, after the batch `after` (cursor), at most `limit`. */
  list(owner: string, after: string | undefined, limit: number): { data: BatchObject[]; hasMore: boolean };
  cancel(id: string, owner: string): BatchObject | undefined;
  /** Runs still going are cancelled; resolves when they have written their files. */
  close(): Promise<void>;
  /** For metrics: batches by status. */
  byStatus(): Record<string, number>;
}

const WINDOW_S = 24 * 3600;
const now = () => Math.floor(Date.now() / 1000);

export function createBatchService(o: {
  files: FileStore;
  send: Send;
  concurrency: number;
  maxRequests: number;
  /** How long a line answered 429 / 503 keeps being tried (default 10 min). */
  retryForMs?: number;
  /** Each line's answer: 2xx (ok) or not. */
  onLine?: (ok: boolean) => void;
}): BatchService {
  const batches = new Map<string, { owner: string; b: BatchObject; abort: AbortController; done: Promise<void> }>();
  const retryForMs = o.retryForMs ?? 600_000;

  async function sendWithRetry(line: BatchLine, endpoint: string, signal: AbortSignal, owner: string): Promise<SendResult> {
    const until = Date.now() + retryForMs;
    for (let attempt = 0; ; attempt++) {
      const r = await o.send(line, endpoint, signal, owner);
      if ((r.status !== 429 && r.status !== 503) || signal.aborted || Date.now() >= until) return r;
      const waitMs = Math.min(Math.max(r.retryAfterS ?? 1, 0.05) * 1000 * 2 ** Math.min(attempt, 4), 30_000, until - Date.now());
      await new Promise<void>((res) => {
        const t = setTimeout(res, waitMs);
        signal.addEventListener("abort", () => (clearTimeout(t), res()), { once: true });
      });
    }
  }

  async function run(owner: string, b: BatchObject, abort: AbortController): Promise<void> {
    const content = await o.files.content(b.input_file_id, owner);
    const { lines, errors } = content ? parseBatchLines(new TextDecoder().decode(content), b.endpoint, o.maxRequests) : { lines: [], errors: [{ code: "file_not_found", message: `The input file ${b.input_file_id} is gone.`, param: "input_file_id", line: null }] };
    if (errors.length) {
      Object.assign(b, { status: "failed", failed_at: now(), errors: { object: "list", data: errors } });
      return;
    }
    Object.assign(b, { status: b.status === "cancelling" ? "cancelling" : "in_progress", in_progress_at: now() });
    b.request_counts.total = lines.length;
    const output = o.files.writer(owner, `${b.id}_output.jsonl`, "batch_output");
    const errorsFile = o.files.writer(owner, `${b.id}_error.jsonl`, "batch_output");
    let next = 0;
    let expired = false;
    const worker = async () => {
      while (!abort.signal.aborted && next < lines.length) {
        if (now() >= b.expires_at) {
          expired = true;
          abort.abort();
          break;
        }
        const i = next++;
        const line = lines[i]!;
        let row: Json;
        let ok = false;
        try {
          const r = await sendWithRetry(line, b.endpoint, abort.signal, owner);
          if (abort.signal.aborted && r.status === 499) break; // cancelled mid-request: not a result
          ok = r.status >= 200 && r.status < 300;
          row = { id: newItemId("batch_req"), custom_id: line.customId, response: { status_code: r.status, request_id: r.requestId, body: r.body }, error: null };
        } catch (err) {
          if (abort.signal.aborted) break;
          row = { id: newItemId("batch_req"), custom_id: line.customId, response: null, error: { code: "request_failed", message: String((err as Error)?.message ?? err) } };
        }
        if (ok) output.line(JSON.stringify(row)), b.request_counts.completed++;
        else errorsFile.line(JSON.stringify(row)), b.request_counts.failed++;
        o.onLine?.(ok);
      }
    };
    await Promise.all(Array.from({ length: Math.min(o.concurrency, lines.length) }, worker));
    const cancelled = b.status === "cancelling";
    if (!cancelled) Object.assign(b, { status: "finalizing", finalizing_at: now() });
    b.output_file_id = (await output.close())?.id ?? null;
    b.error_file_id = (await errorsFile.close())?.id ?? null;
    if (cancelled) Object.assign(b, { status: "cancelled", cancelled_at: now() });
    else if (expired) Object.assign(b, { status: "expired", expired_at: now() });
    else Object.assign(b, { status: "completed", completed_at: now() });
  }

  return {
    async create(owner, body) {
      const fileId = body.input_file_id;
      if (typeof fileId !== "string" || fileId === "") throw badRequest("'input_file_id' is required.", "input_file_id", "missing_required_parameter");
      const file = o.files.get(fileId, owner);
      if (!file) throw new GatewayError(404, `No such File object: ${fileId}`, "invalid_request_error", "file_not_found", "input_file_id");
      if (file.purpose !== "batch") throw badRequest(`File ${fileId} has purpose '${file.purpose}'; a batch's input needs purpose 'batch'.`, "input_file_id");
      const endpoint = body.endpoint;
      if (typeof endpoint !== "string" || !BATCH_ENDPOINTS.includes(endpoint)) throw badRequest(`'endpoint' must be one of ${BATCH_ENDPOINTS.join(", ")}.`, "endpoint");
      if (body.completion_window !== "24h") throw badRequest("'completion_window' must be \"24h\".", "completion_window");
      const meta = body.metadata;
      if (meta !== undefined && meta !== null && (!isObject(meta) || Object.values(meta).some((v) => typeof v !== "string"))) throw badRequest("'metadata' must be an object of strings.", "metadata");
      const t = now();
      const b: BatchObject = {
        id: randomId("batch"),
        object: "batch",
        endpoint,
        errors: null,
        input_file_id: fileId,
        completion_window: "24h",
        status: "validating",
        output_file_id: null,
        error_file_id: null,
        created_at: t,
        in_progress_at: null,
        expires_at: t + WINDOW_S,
        finalizing_at: null,
        completed_at: null,
        failed_at: null,
        expired_at: null,
        cancelling_at: null,
        cancelled_at: null,
        request_counts: { total: 0, completed: 0, failed: 0 },
        metadata: isObject(meta) ? (meta as Record<string, string>) : null,
      };
      const abort = new AbortController();
      const done = run(owner, b, abort).catch((err) => {
        Object.assign(b, { status: "failed", failed_at: now(), errors: { object: "list", data: [{ code: "internal_error", message: String((err as Error)?.message ?? err), param: null, line: null }] } });
      });
      batches.set(b.id, { owner, b, abort, done });
      return { ...b };
    },
    get(id, owner) {
      const e = batches.get(id);
      return e && e.owner === owner ? { ...e.b, request_counts: { ...e.b.request_counts } } : undefined;
    },
    list(owner, after, limit) {
      const mine = [...batches.values()].filter((e) => e.owner === owner).map((e) => e.b).reverse();
      const at = after === undefined ? -1 : mine.findIndex((b) => b.id === after);
      if (after !== undefined && at < 0) throw badRequest(`'after' names no batch of yours: ${after}.`, "after");
      const from = at + 1;
      return { data: mine.slice(from, from + limit).map((b) => ({ ...b })), hasMore: from + limit < mine.length };
    },
    cancel(id, owner) {
      const e = batches.get(id);
      if (!e || e.owner !== owner) return undefined;
      if (e.b.status === "validating" || e.b.status === "in_progress") {
        Object.assign(e.b, { status: "cancelling", cancelling_at: now() });
        e.abort.abort();
      }
      return { ...e.b };
    },
    byStatus() {
      const out: Record<string, number> = {};
      for (const e of batches.values()) out[e.b.status] = (out[e.b.status] ?? 0) + 1;
      return out;
    },
    async close() {
      for (const e of batches.values()) if (e.b.status === "validating" || e.b.status === "in_progress") (e.b.status = "cancelling"), (e.b.cancelling_at = now()), e.abort.abort();
      await Promise.all([...batches.values()].map((e) => e.done));
    },
  };
}
