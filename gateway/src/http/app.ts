/**
 * The Hono app: OpenAI routes (chat, completions, responses, conversations, files and batches), Anthropic's messages, health, readiness and metrics. The only
 * module tree that imports hono; everything it calls is plain TypeScript.
 *
 * @example
 * const app = createApp(deps);
 * Bun.serve({ port: 8080, fetch: app.fetch });
 */
import { Hono } from "hono";
import { modelNotFound, routeNotFound } from "../errors";
import { createAuth, createKeyAuth, mayUse } from "./auth";
import type { GatewayDeps } from "./deps";
import { createGenerateHandler, createGeneration } from "./generate";
import { createOnError, errorResponse, errorShapeOf } from "./on-error";
import { registerBatchRoutes } from "./batches";
import { registerConversationRoutes } from "./conversations";
import { registerMessagesRoutes } from "./messages";
import { registerPassthroughRoutes } from "./passthrough";
import { registerResponsesRoutes } from "./responses";
import { createDetokenizeHandler, createTokenizeHandler } from "./tokenize";

/** The app, and what must be stopped with it (running batches and background responses). */
export function createApp(deps: GatewayDeps): Hono & { close(): Promise<void> } {
  const { pool, log, metrics, config } = deps;
  const app = new Hono();
  const started = Math.floor(Date.now() / 1000);

  app.onError(createOnError(log));
  app.notFound((c) => errorResponse(routeNotFound(c.req.method, c.req.path), log, errorShapeOf(c.req.path)));

  app.get("/healthz", (c) => c.json({ status: "ok" }));
  app.get("/readyz", (c) => {
    const backends = pool.members.map((m) => ({ id: m.backend.id, kind: m.backend.kind, healthy: m.healthy, models: m.backend.models(), error: m.lastError }));
    return pool.ready() ? c.json({ status: "ready", backends }) : c.json({ status: "not ready", backends }, 503);
  });
  app.get("/metrics", async (c) => c.body(await metrics.registry.metrics(), 200, { "content-type": metrics.registry.contentType }));

  const auth = createAuth(config.auth.api_keys);
  const keyAuth = deps.access ? createKeyAuth(deps.access) : null;
  for (const path of ["/v1/*", "/tokenize", "/detokenize"]) {
    if (auth) app.use(path, auth);
    if (keyAuth) app.use(path, keyAuth);
  }
  const modelObject = (id: string) => ({ id, object: "model", created: started, owned_by: "dispatch" });
  // the models served, less those the caller's key may not use
  app.get("/v1/models", (c) => c.json({ object: "list", data: pool.models().filter((m) => mayUse(c.req.raw, m)).sort().map(modelObject) }));
  // one model (`client.models.retrieve`): served by a healthy backend, else 404; ids may hold slashes (org/name)
  app.get("/v1/models/:id{.+}", (c) => {
    const id = c.req.param("id");
    if (!pool.models().includes(id) || !mayUse(c.req.raw, id)) throw modelNotFound(id);
    return c.json(modelObject(id));
  });
  const generation = createGeneration(deps);
  app.post("/v1/chat/completions", createGenerateHandler(deps, "chat", generation));
  app.post("/v1/completions", createGenerateHandler(deps, "completions", generation));
  const responses = registerResponsesRoutes(app, deps, generation, deps.responses);
  if (deps.conversations) registerConversationRoutes(app, deps, deps.conversations);
  registerMessagesRoutes(app, deps, generation);
  const batches = deps.files ? registerBatchRoutes(app, deps, deps.files) : undefined;
  app.post("/tokenize", createTokenizeHandler(deps));
  app.post("/detokenize", createDetokenizeHandler(deps));
  // last: any other POST /v1/... naming a model goes to an OpenAI-HTTP backend that serves it
  registerPassthroughRoutes(app, deps);
  return Object.assign(app, { close: async () => void (await Promise.all([batches?.close(), responses.close()])) });
}
