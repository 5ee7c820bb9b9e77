/**
 * Anthropic's Messages API: `POST /v1/messages` (streamed or not) and `POST /v1/messages/count_tokens`, for clients
 * built on Anthropic's SDKs. A request becomes a chat completion (anthropic/parse-request.ts) on the gateway's one
 * generation path (routing, failover, limits, metrics under `endpoint="messages"`, every backend kind: an
 * OpenAI-HTTP backend is sent the chat body); the chat output is rebuilt into the message's content blocks and,
 * streamed, the API's events (anthropic/message-builder.ts). Errors take Anthropic's shape (on-error.ts); the key
 * may come as `x-api-key` (auth.ts).
 */
import type { Hono } from "hono";
import { anthropicErrorBody } from "../anthropic/errors";
import { createMessageBuilder, type MessageBuilder } from "../anthropic/message-builder";
import { parseMessagesRequest } from "../anthropic/parse-request";
import { badGateway } from "../errors";
import { parseChatRequest } from "../openai/parse-chat";
import { parseJsonObject } from "../openai/parse-common";
import { newItemId } from "../responses/items";
import { type ChatTranslator, chatPresenter, sseEvents } from "./chat-presenter";
import type { GatewayDeps } from "./deps";
import type { Generation } from "./generate";
import { readBody } from "./read-body";
import { profileOf } from "./tokenize";

function translator(b: MessageBuilder): ChatTranslator {
  return {
    start: (call) => sseEvents(b.start(call.stats.promptTokens)),
    chunk: (c) => sseEvents(b.chunk(c)),
    end: async () => sseEvents(b.end()),
    async body(chat) {
      b.completion(chat);
      b.end();
      if (b.failed) throw badGateway(`The upstream's chat completion could not be read as a message: ${b.failed.message}`, false);
      return JSON.stringify(b.message);
    },
    errorFrame(err) {
      b.end();
      return sseEvents([{ type: "error", error: anthropicErrorBody(err).error }]);
    },
  };
}

export function registerMessagesRoutes(app: Hono, deps: GatewayDeps, generation: Generation): void {
  const maxBody = deps.config.server.max_body_bytes;

  app.post("/v1/messages", async (c) => {
    const t0 = performance.now();
    const r = parseMessagesRequest(parseJsonObject(await readBody(c.req.raw, maxBody)));
    const req = parseChatRequest(JSON.stringify(r.chat), r.chat);
    const builder = createMessageBuilder({ id: newItemId("msg"), model: r.model, stopSequences: r.stopSequences });
    return generation(c, req, "messages", t0, chatPresenter(r.stream, translator(builder)));
  });

  // The prompt's tokens as the model will see them (the chat template applied, tools included): dispatch models only.
  app.post("/v1/messages/count_tokens", async (c) => {
    const body = parseJsonObject(await readBody(c.req.raw, maxBody));
    const profile = profileOf(deps, body.model, c.req.raw);
    const r = parseMessagesRequest({ max_tokens: 1, ...body });
    return c.json({ input_tokens: profile.prepare(parseChatRequest(JSON.stringify(r.chat), r.chat)).tokenIds.length });
  });
}
