/**
 * OpenAI's Responses API: `POST /v1/responses` (streamed or not), `GET /v1/responses/{id}`,
 * `GET /v1/responses/{id}/input_items`, `DELETE /v1/responses/{id}` and `POST /v1/responses/{id}/cancel`.
 * A request becomes a chat completion (responses/parse-request.ts, with the earlier turns of its
 * `previous_response_id` chain from the store) on the gateway's one generation path, so routing, failover, limits
 * and every backend kind behave as for chat; the call's chat output is rebuilt, as it comes, into output items and,
 * streamed, the API's typed events (responses/output-builder.ts), on the same direct stream chat uses
 * (http/chat-presenter.ts). A stored response is saved before its final event is sent, so a client may continue
 * the conversation the moment it has the response.
 */
import type { Context, Hono } from "hono";
import { Counter } from "prom-client";
import { badGateway, badRequest, GatewayError, modelNotFound } from "../errors";
import type { Json } from "../openai/fields";
import { parseChatRequest } from "../openai/parse-chat";
import { parseJsonObject } from "../openai/parse-common";
import { type Item, randomId } from "../responses/items";
import { createOutputBuilder, type OutputBuilder } from "../responses/output-builder";
import { chatBody, parseResponsesRequest, type ResponsesRequest } from "../responses/parse-request";
import { ChainTooLong, history, ResponseNotFound, type ResponseStore, type StoredResponse } from "../responses/store";
import { ownerOf, principalOf, trustRequest } from "./auth";
import type { GatewayDeps } from "./deps";
import { type ChatTranslator, chatPresenter, sseEvents } from "./chat-presenter";
import type { Generation } from "./generate";
import { itemPage, storeCall } from "./list-query";
import { readBody } from "./read-body";
import { profileOf } from "./tokenize";

const notFound = (id: string, param: string | null = null, code: string | null = null) =>
  new GatewayError(404, `Response with id '${id}' not found.`, "invalid_request_error", code, param);

/** A call to the response store: its not-found and too-long chain pass to the caller, a failure is a 503. */
const stored = <T>(op: () => Promise<T>) => storeCall("response store", op, (e) => e instanceof ResponseNotFound || e instanceof ChainTooLong);


/** The Responses API's side of a generation: events from the chat chunks, the Response object from a chat body. */
function translator(b: OutputBuilder, save: () => Promise<void>): ChatTranslator {
  return {
    start: () => sseEvents(b.start()),
    chunk: (c) => sseEvents(b.chunk(c)),
    async end() {
      const last = b.end();
      await save();
      return sseEvents(last);
    },
    async body(chat) {
      b.completion(chat);
      b.end();
      if (b.response.status === "failed") throw badGateway("The upstream's chat completion could not be read as a response.", false);
      await save();
      return JSON.stringify(b.response);
    },
    errorFrame(err) {
      b.chunk(err.toBody());
      const evs = b.end();
      void save();
      return sseEvents(evs);
    },
  };
}

/** Background runs: the in-process request that runs one carries the id its response was given when it was queued. */
const presetIds = new WeakMap<Request, string>();

export function registerResponsesRoutes(app: Hono, deps: GatewayDeps, generation: Generation, store: ResponseStore | undefined): { close(): Promise<void> } {
  const { config, log } = deps;
  const maxChain = config.responses.max_chain;
  const saves = new Counter({
    name: "dispatch_gateway_responses_stored_total",
    help: "Responses saved for GET and previous_response_id, by outcome (stored, failed: the store failed)",
    labelNames: ["outcome"] as const,
    registers: [deps.metrics.registry],
  });
  const storedOk = saves.labels("stored");
  const storeFailed = saves.labels("failed");

  async function record(c: Context): Promise<StoredResponse> {
    const id = c.req.param("id")!;
    const r = store ? await stored(() => store.get(id)) : undefined;
    if (!r || r.owner !== ownerOf(c.req.raw)) throw notFound(id);
    return r;
  }

  /** The earlier items a request continues: its conversation's, or its `previous_response_id` chain's. */
  async function priorItems(r: ResponsesRequest, owner: string): Promise<Item[]> {
    const convs = deps.conversations;
    let prior: Item[] = [];
    if (r.conversationId !== undefined) {
      const id = r.conversationId;
      if (!convs || !(await stored(() => convs.get(id, owner)))) throw new GatewayError(404, `Conversation with id '${id}' not found.`, "invalid_request_error", "conversation_not_found", "conversation");
      prior = await stored(() => convs.items(id));
    }
    if (r.previousResponseId !== undefined) {
      const prev = r.previousResponseId;
      if (!store) throw notFound(prev, "previous_response_id", "previous_response_not_found");
      try {
        prior = await stored(() => history(store, prev, owner, maxChain));
      } catch (err) {
        if (err instanceof ResponseNotFound) throw new GatewayError(404, `Previous response with id '${err.id}' not found.`, "invalid_request_error", "previous_response_not_found", "previous_response_id");
        if (err instanceof ChainTooLong) throw badRequest(err.message, "previous_response_id");
        throw err;
      }
    }
    return prior;
  }

  // the input's tokens as the model would see them (the template applied): dispatch models only
  app.post("/v1/responses/input_tokens", async (c) => {
    const body = parseJsonObject(await readBody(c.req.raw, config.server.max_body_bytes));
    const profile = profileOf(deps, body.model, c.req.raw);
    // input may be absent here (instructions alone, a conversation, a previous response)
    const r = parseResponsesRequest({ ...body, input: body.input ?? "-" });
    if (body.input === undefined) r.input = [];
    const chat = chatBody(r, await priorItems(r, ownerOf(c.req.raw)));
    if ((chat.messages as unknown[]).length === 0) throw badRequest("'input' (or 'instructions', a conversation, a previous response) is needed to count tokens.", "input", "missing_required_parameter");
    return c.json({ object: "response.input_tokens", input_tokens: profile.prepare(parseChatRequest(JSON.stringify(chat), chat)).tokenIds.length });
  });

  app.post("/v1/responses", async (c) => {
    const t0 = performance.now();
    const raw = await readBody(c.req.raw, config.server.max_body_bytes);
    const body = parseJsonObject(raw);
    const r = parseResponsesRequest(body);
    const owner = ownerOf(c.req.raw);
    const chat = chatBody(r, await priorItems(r, owner));
    const req = parseChatRequest(JSON.stringify(chat), chat);
    const preset = presetIds.get(c.req.raw);
    const builder = createOutputBuilder({
      id: preset ?? randomId("resp"),
      object: "response",
      created_at: Math.floor(Date.now() / 1000),
      model: r.model,
      background: r.background || preset !== undefined,
      service_tier: "default",
      ...r.echo,
    });
    if (r.background) return queue(c, body, r, owner, builder.response as StoredResponse["response"]);
    const save = async () => {
      if (r.conversationId !== undefined) await appendTurn(r.conversationId, r.input, builder.response);
      if (!store || !r.store) return;
      const rec: StoredResponse = { owner, response: builder.response as StoredResponse["response"], input: r.input, previous: r.previousResponseId ?? null };
      try {
        await store.put(rec);
        storedOk.inc();
      } catch (err) {
        storeFailed.inc();
        log.warn("response not stored: the store failed", { id: rec.response.id, error: String((err as Error)?.message ?? err) });
      }
    };
    return generation(c, req, "responses", t0, chatPresenter(r.stream, translator(builder, save)));
  });

  app.get("/v1/responses/:id", async (c) => c.json((await record(c)).response));

  app.delete("/v1/responses/:id", async (c) => {
    const r = await record(c);
    await stored(() => store!.delete(r.response.id));
    return c.json({ id: r.response.id, object: "response", deleted: true });
  });

  app.get("/v1/responses/:id/input_items", async (c) => {
    const r = await record(c);
    return c.json(itemPage(r.input, (n) => c.req.query(n), `response '${r.response.id}'`));
  });

  /** A conversation takes a response's turn (its input, then its output) once it ended: completed, or cut by length. */
  async function appendTurn(id: string, input: readonly Item[], response: Json): Promise<void> {
    if (response.status !== "completed" && response.status !== "incomplete") return;
    try {
      await deps.conversations!.append(id, [...input, ...(response.output as Item[])]);
    } catch (err) {
      log.warn("conversation not updated: the store failed", { conversation: id, error: String((err as Error)?.message ?? err) });
    }
  }

  /** Background runs on this replica, by response id. */
  const running = new Map<string, { abort: AbortController; task: Promise<void> }>();

  /**
   * `background: true`: the response is stored as queued and answered at once; an in-process request (as its caller,
   * auth.ts `trustRequest`) runs it under the same id, and its end replaces the record: completed, incomplete,
   * failed (the request's error) or cancelled.
   */
  async function queue(c: Context, body: Json, r: ResponsesRequest, owner: string, response: StoredResponse["response"]): Promise<Response> {
    if (!store) throw badRequest("'background' needs stored responses, and responses.store is off on this gateway.", "background", "unsupported_parameter");
    if (!deps.pool.knows(r.model)) throw modelNotFound(r.model);
    const base = { owner, input: r.input, previous: r.previousResponseId ?? null };
    const queued = { ...response, status: "queued" };
    const put = (fields: Json) => stored(() => store.put({ ...base, response: { ...queued, ...fields } as StoredResponse["response"] }));
    await put({});
    const abort = new AbortController();
    const req = new Request("http://gateway.internal/v1/responses", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ ...body, background: false, stream: false }), signal: abort.signal });
    trustRequest(req, owner, principalOf(c.req.raw));
    presetIds.set(req, queued.id);
    const task = (async () => {
      try {
        await put({ status: "in_progress" });
        const res = await app.fetch(req);
        if (res.ok) return void (await res.arrayBuffer()); // its handler stored the finished response
        if (abort.signal.aborted) return void (await put({ status: "cancelled" }));
        const err = ((await res.json().catch(() => ({}))) as { error?: { code?: string; message?: string } }).error;
        await put({ status: "failed", error: { code: "server_error", message: err?.message ?? `The run failed (HTTP ${res.status}).` } });
      } catch (err) {
        await put(abort.signal.aborted ? { status: "cancelled" } : { status: "failed", error: { code: "server_error", message: String((err as Error)?.message ?? err) } }).catch(() => {});
      } finally {
        running.delete(queued.id);
      }
    })();
    running.set(queued.id, { abort, task });
    return c.json(queued);
  }

  app.post("/v1/responses/:id/cancel", async (c) => {
    const rec = await record(c);
    const run = running.get(rec.response.id);
    if (run) {
      run.abort.abort();
      await run.task;
      return c.json((await record(c)).response);
    }
    if (rec.response.background !== true) throw badRequest("Only background responses can be cancelled (a streamed response stops when its client disconnects).", null, "unsupported_parameter");
    const status = rec.response.status;
    if (status === "queued" || status === "in_progress") {
      throw new GatewayError(409, `Response '${rec.response.id}' runs on another gateway replica: cancel it there.`, "invalid_request_error", "response_running_elsewhere");
    }
    return c.json(rec.response); // finished already: as it is
  });

  return {
    async close() {
      for (const r of running.values()) r.abort.abort();
      await Promise.all([...running.values()].map((r) => r.task));
    },
  };
}
