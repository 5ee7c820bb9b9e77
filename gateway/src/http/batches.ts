/**
 * OpenAI's Files and Batch APIs: `POST /v1/files` (multipart, purpose "batch"), `GET /v1/files[/{id}[/content]]`,
 * `DELETE /v1/files/{id}`; `POST /v1/batches`, `GET /v1/batches[/{id}]`, `POST /v1/batches/{id}/cancel`. A batch's
 * requests go through this same app (batches/batch-service.ts sends them), as their creator: the auth middlewares
 * trust them (auth.ts `trustRequest`) and the creator's key limits them; what they store (responses) is the
 * creator's.
 */
import type { Hono } from "hono";
import { Counter, Gauge } from "prom-client";
import type { BatchLine } from "../batches/batch-lines";
import { type BatchService, createBatchService, type SendResult } from "../batches/batch-service";
import type { FileStore } from "../batches/file-store";
import { badRequest, GatewayError, payloadTooLarge } from "../errors";
import { parseJsonObject } from "../openai/parse-common";
import { ownerOf, principalOf, trustRequest } from "./auth";
import type { GatewayDeps } from "./deps";
import { limitOf } from "./list-query";
import { readBody } from "./read-body";

const fileNotFound = (id: string) => new GatewayError(404, `No such File object: ${id}`, "invalid_request_error", "file_not_found", "file_id");
const batchNotFound = (id: string) => new GatewayError(404, `No such batch: ${id}`, "invalid_request_error", "batch_not_found", "batch_id");

/** Endpoints whose body takes `priority` (the gateway's generation routes). */
const PRIORITY_ENDPOINTS = new Set(["/v1/chat/completions", "/v1/completions", "/v1/responses"]);

export function registerBatchRoutes(app: Hono, deps: GatewayDeps, files: FileStore): BatchService {
  const { config } = deps;
  const { max_file_bytes: maxFile, priority } = config.batches;
  const principals = new Map<string, ReturnType<typeof principalOf>>();

  const send = async (line: BatchLine, endpoint: string, signal: AbortSignal, owner: string): Promise<SendResult> => {
    const body = { ...line.body, stream: false } as Record<string, unknown>;
    if (priority !== 0 && body.priority === undefined && PRIORITY_ENDPOINTS.has(endpoint)) body.priority = priority;
    const req = new Request(`http://gateway.internal${endpoint}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body), signal });
    trustRequest(req, owner, principals.get(owner));
    const res = await app.fetch(req);
    const text = await res.text();
    let parsed: unknown = text;
    try {
      parsed = JSON.parse(text);
    } catch {
      // kept as text
    }
    const ra = Number(res.headers.get("retry-after"));
    return { status: res.status, requestId: res.headers.get("x-request-id"), body: parsed, retryAfterS: Number.isFinite(ra) && ra > 0 ? ra : undefined };
  };
  const lines = new Counter({
    name: "dispatch_gateway_batch_requests_total",
    help: "Batch requests answered, by outcome (completed: 2xx; failed: the rest)",
    labelNames: ["outcome"] as const,
    registers: [deps.metrics.registry],
  });
  const completed = lines.labels("completed");
  const failed = lines.labels("failed");
  const batches = createBatchService({
    files,
    send,
    concurrency: config.batches.concurrency,
    maxRequests: config.batches.max_requests,
    onLine: (ok) => (ok ? completed : failed).inc(),
  });
  const STATUSES = ["validating", "in_progress", "finalizing", "completed", "failed", "cancelling", "cancelled", "expired"];
  new Gauge({
    name: "dispatch_gateway_batches",
    help: "Batches this gateway holds, by status",
    labelNames: ["status"] as const,
    registers: [deps.metrics.registry],
    collect() {
      const byStatus = batches.byStatus();
      for (const s of STATUSES) this.set({ status: s }, byStatus[s] ?? 0);
    },
  });

  app.post("/v1/files", async (c) => {
    const declared = Number(c.req.header("content-length") ?? 0);
    if (declared > maxFile + 64 * 1024) throw payloadTooLarge(maxFile);
    let form: Awaited<ReturnType<Request["formData"]>>;
    try {
      form = await c.req.raw.formData();
    } catch {
      throw badRequest("The body must be multipart/form-data with 'file' and 'purpose'.", "file", "invalid_value");
    }
    const file = form.get("file");
    const purpose = form.get("purpose");
    if (!(file instanceof Blob)) throw badRequest("'file' is required (a file part).", "file", "missing_required_parameter");
    if (purpose !== "batch") throw badRequest(`'purpose' must be "batch" (the files this gateway keeps are batch inputs), got ${JSON.stringify(purpose)}.`, "purpose");
    if (file.size > maxFile) throw payloadTooLarge(maxFile);
    const name = file instanceof File ? file.name : "upload.jsonl";
    return c.json(await files.put(ownerOf(c.req.raw), name, purpose, new Uint8Array(await file.arrayBuffer())));
  });
  app.get("/v1/files", (c) => {
    const data = files.list(ownerOf(c.req.raw), c.req.query("purpose"));
    return c.json({ object: "list", data, has_more: false });
  });
  app.get("/v1/files/:id", (c) => {
    const f = files.get(c.req.param("id"), ownerOf(c.req.raw));
    if (!f) throw fileNotFound(c.req.param("id"));
    return c.json(f);
  });
  app.get("/v1/files/:id/content", async (c) => {
    const bytes = await files.content(c.req.param("id"), ownerOf(c.req.raw));
    if (!bytes) throw fileNotFound(c.req.param("id"));
    return new Response(bytes, { headers: { "content-type": "application/jsonl" } });
  });
  app.delete("/v1/files/:id", async (c) => {
    const id = c.req.param("id");
    if (!(await files.delete(id, ownerOf(c.req.raw)))) throw fileNotFound(id);
    return c.json({ id, object: "file", deleted: true });
  });

  app.post("/v1/batches", async (c) => {
    const owner = ownerOf(c.req.raw);
    const body = parseJsonObject(await readBody(c.req.raw, config.server.max_body_bytes));
    principals.set(owner, principalOf(c.req.raw));
    return c.json(await batches.create(owner, body));
  });
  app.get("/v1/batches", (c) => {
    const { data, hasMore } = batches.list(ownerOf(c.req.raw), c.req.query("after"), limitOf(c.req.query("limit")));
    return c.json({ object: "list", data, first_id: data[0]?.id ?? null, last_id: data.at(-1)?.id ?? null, has_more: hasMore });
  });
  app.get("/v1/batches/:id", (c) => {
    const b = batches.get(c.req.param("id"), ownerOf(c.req.raw));
    if (!b) throw batchNotFound(c.req.param("id"));
    return c.json(b);
  });
  app.post("/v1/batches/:id/cancel", (c) => {
    const b = batches.cancel(c.req.param("id"), ownerOf(c.req.raw));
    if (!b) throw batchNotFound(c.req.param("id"));
    return c.json(b);
  });
  return batches;
}
