/**
 * OpenAI's Conversations API: `POST /v1/conversations` (with up to 20 first items and metadata), `GET`, `POST`
 * (metadata) and `DELETE /v1/conversations/{id}`; `GET` (paged) and `POST /v1/conversations/{id}/items`,
 * `GET` and `DELETE /v1/conversations/{id}/items/{item_id}`. Items are the Responses API's (responses/items.ts);
 * a response with `conversation` runs in one (http/responses.ts). Records belong to their caller (responses/
 * conversations.ts).
 */
import type { Context, Hono } from "hono";
import { badRequest, GatewayError } from "../errors";
import type { Json } from "../openai/fields";
import { parseJsonObject } from "../openai/parse-common";
import type { Conversation, ConversationStore } from "../responses/conversations";
import { parseInput } from "../responses/items";
import { parseMetadata } from "../responses/parse-request";
import { ownerOf } from "./auth";
import type { GatewayDeps } from "./deps";
import { itemPage, storeCall } from "./list-query";
import { readBody } from "./read-body";

/** Most items one call adds (the API's bound on creation, used for appends too). */
const MAX_ITEMS = 20;

const notFound = (id: string) => new GatewayError(404, `Conversation with id '${id}' not found.`, "invalid_request_error", "conversation_not_found", "conversation_id");

function itemsOf(v: unknown, required: boolean): ReturnType<typeof parseInput> {
  if (v === undefined || v === null) {
    if (required) throw badRequest("'items' is required.", "items", "missing_required_parameter");
    return [];
  }
  if (!Array.isArray(v) || v.length > MAX_ITEMS) throw badRequest(`'items' must be an array of at most ${MAX_ITEMS} items.`, "items");
  return v.length ? parseInput(v) : [];
}

export function registerConversationRoutes(app: Hono, deps: GatewayDeps, convs: ConversationStore): void {
  const maxBody = deps.config.server.max_body_bytes;
  const stored = <T>(op: () => Promise<T>) => storeCall("conversation store", op);
  async function conversation(c: Context): Promise<Conversation> {
    const id = c.req.param("id")!;
    const conv = await stored(() => convs.get(id, ownerOf(c.req.raw)));
    if (!conv) throw notFound(id);
    return conv;
  }
  const body = async (c: Context): Promise<Json> => parseJsonObject(await readBody(c.req.raw, maxBody));

  app.post("/v1/conversations", async (c) => {
    const b = await body(c);
    return c.json(await stored(() => convs.create(ownerOf(c.req.raw), parseMetadata(b.metadata) ?? {}, itemsOf(b.items, false))));
  });
  app.get("/v1/conversations/:id", async (c) => c.json(await conversation(c)));
  app.post("/v1/conversations/:id", async (c) => {
    const conv = await conversation(c);
    const metadata = parseMetadata((await body(c)).metadata) ?? {};
    await stored(() => convs.setMetadata(conv.id, metadata));
    return c.json({ ...conv, metadata });
  });
  app.delete("/v1/conversations/:id", async (c) => {
    const conv = await conversation(c);
    await stored(() => convs.delete(conv.id));
    return c.json({ id: conv.id, object: "conversation.deleted", deleted: true });
  });

  app.get("/v1/conversations/:id/items", async (c) => {
    const conv = await conversation(c);
    return c.json(itemPage(await stored(() => convs.items(conv.id)), (n) => c.req.query(n), `conversation '${conv.id}'`));
  });
  app.post("/v1/conversations/:id/items", async (c) => {
    const conv = await conversation(c);
    const items = itemsOf((await body(c)).items, true);
    await stored(() => convs.append(conv.id, items));
    return c.json({ object: "list", data: items, first_id: items[0]?.id ?? null, last_id: items.at(-1)?.id ?? null, has_more: false });
  });
  app.get("/v1/conversations/:id/items/:item", async (c) => {
    const conv = await conversation(c);
    const item = (await stored(() => convs.items(conv.id))).find((i) => i.id === c.req.param("item"));
    if (!item) throw new GatewayError(404, `Item with id '${c.req.param("item")}' not found.`, "invalid_request_error", "item_not_found", "item_id");
    return c.json(item);
  });
  app.delete("/v1/conversations/:id/items/:item", async (c) => {
    const conv = await conversation(c);
    if (!(await stored(() => convs.deleteItem(conv.id, c.req.param("item")!)))) {
      throw new GatewayError(404, `Item with id '${c.req.param("item")}' not found.`, "invalid_request_error", "item_not_found", "item_id");
    }
    return c.json(conv);
  });
}
