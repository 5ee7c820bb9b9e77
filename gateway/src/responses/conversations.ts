/**
 * OpenAI's conversations (`/v1/conversations`): a stored list of items a response can run in (`conversation` on
 * `POST /v1/responses`: the items come before its input, and its input and output are appended after it). Owned like
 * stored responses (another caller's id reads as not found). Appends are atomic: in memory one at a time, in Redis
 * an RPUSH to the conversation's list, so two responses finishing in one conversation lose neither's items.
 *
 * @example
 * const c = await convs.create("", { topic: "x" }, items);
 * await convs.append(c.id, moreItems);
 */
import type Redis from "ioredis";
import type { Item } from "./items";
import { randomId } from "./items";

export interface Conversation {
  id: string;
  object: "conversation";
  created_at: number;
  metadata: Record<string, string>;
}

export interface ConversationStore {
  create(owner: string, metadata: Record<string, string>, items: Item[]): Promise<Conversation>;
  /** The conversation, when it exists and belongs to `owner`. */
  get(id: string, owner: string): Promise<Conversation | undefined>;
  setMetadata(id: string, metadata: Record<string, string>): Promise<void>;
  delete(id: string): Promise<void>;
  /** Items, oldest first. */
  items(id: string): Promise<Item[]>;
  append(id: string, items: readonly Item[]): Promise<void>;
  /** True when there was such an item. */
  deleteItem(id: string, itemId: string): Promise<boolean>;
}

const now = () => Math.floor(Date.now() / 1000);

/** In memory: bounded in conversations and in the size of their items (JSON text), the oldest out first. */
export function createMemoryConversations(o: { maxEntries: number; maxBytes: number }): ConversationStore {
  const convs = new Map<string, { owner: string; conv: Conversation; items: string[]; bytes: number }>(); // items as JSON
  let bytes = 0;
  const drop = (id: string) => {
    const e = convs.get(id);
    if (e) (bytes -= e.bytes), convs.delete(id);
  };
  const bound = () => {
    while (convs.size > o.maxEntries || (bytes > o.maxBytes && convs.size > 0)) drop(convs.keys().next().value!);
  };
  const add = (e: { items: string[]; bytes: number }, items: readonly Item[]) => {
    for (const i of items) {
      const text = JSON.stringify(i);
      e.items.push(text);
      e.bytes += text.length;
      bytes += text.length;
    }
  };
  return {
    async create(owner, metadata, items) {
      const conv: Conversation = { id: randomId("conv"), object: "conversation", created_at: now(), metadata };
      const e = { owner, conv, items: [] as string[], bytes: 0 };
      convs.set(conv.id, e);
      add(e, items);
      bound();
      return { ...conv };
    },
    async get(id, owner) {
      const e = convs.get(id);
      return e && e.owner === owner ? { ...e.conv, metadata: { ...e.conv.metadata } } : undefined;
    },
    async setMetadata(id, metadata) {
      const e = convs.get(id);
      if (e) e.conv.metadata = metadata;
    },
    async delete(id) {
      drop(id);
    },
    async items(id) {
      return (convs.get(id)?.items ?? []).map((i) => JSON.parse(i) as Item);
    },
    async append(id, items) {
      const e = convs.get(id);
      if (!e) return;
      add(e, items);
      bound();
    },
    async deleteItem(id, itemId) {
      const e = convs.get(id);
      const at = e ? e.items.findIndex((i) => (JSON.parse(i) as Item).id === itemId) : -1;
      if (at < 0) return false;
      const [gone] = e!.items.splice(at, 1);
      e!.bytes -= gone!.length;
      bytes -= gone!.length;
      return true;
    },
  };
}

/** In Redis: `dispatch:conv:<id>` (owner and the conversation, JSON) and `dispatch:conv:<id>:items` (a list). */
export function createRedisConversations(redis: Redis, o: { ttlS: number; prefix?: string }): ConversationStore {
  const key = (id: string) => `${o.prefix ?? "dispatch:conv:"}${id}`;
  const itemsKey = (id: string) => `${key(id)}:items`;
  const touch = (id: string) => redis.multi().expire(key(id), o.ttlS).expire(itemsKey(id), o.ttlS);
  return {
    async create(owner, metadata, items) {
      const conv: Conversation = { id: randomId("conv"), object: "conversation", created_at: now(), metadata };
      const m = redis.multi().set(key(conv.id), JSON.stringify({ owner, conv }), "EX", o.ttlS);
      if (items.length) m.rpush(itemsKey(conv.id), ...items.map((i) => JSON.stringify(i))).expire(itemsKey(conv.id), o.ttlS);
      await m.exec();
      return conv;
    },
    async get(id, owner) {
      const v = await redis.get(key(id));
      if (v === null) return undefined;
      const e = JSON.parse(v) as { owner: string; conv: Conversation };
      return e.owner === owner ? e.conv : undefined;
    },
    async setMetadata(id, metadata) {
      const v = await redis.get(key(id));
      if (v === null) return;
      const e = JSON.parse(v) as { owner: string; conv: Conversation };
      await redis.set(key(id), JSON.stringify({ ...e, conv: { ...e.conv, metadata } }), "EX", o.ttlS);
    },
    async delete(id) {
      await redis.del(key(id), itemsKey(id));
    },
    async items(id) {
      return (await redis.lrange(itemsKey(id), 0, -1)).map((i) => JSON.parse(i) as Item);
    },
    async append(id, items) {
      if (items.length === 0) return;
      await redis.rpush(itemsKey(id), ...items.map((i) => JSON.stringify(i)));
      await touch(id).exec();
    },
    async deleteItem(id, itemId) {
      for (const raw of await redis.lrange(itemsKey(id), 0, -1)) {
        if ((JSON.parse(raw) as Item).id === itemId) return (await redis.lrem(itemsKey(id), 1, raw)) > 0;
      }
      return false;
    },
  };
}
