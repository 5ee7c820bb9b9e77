/**
 * Stored responses, for `GET /v1/responses/{id}`, its input items, and `previous_response_id`. A record holds one
 * response and the input items of its own request; a conversation is the chain of records its
 * `previous_response_id`s name, walked back by `history`. Records belong to the caller that made them (`owner`:
 * the API key's id or digest, "" without auth): another caller's id reads as not found.
 * In memory (one gateway; bounded in entries and in bytes of their JSON, oldest out first) or in Redis (`redis-store.ts`, every replica).
 *
 * @example
 * const store = createMemoryStore({ maxEntries: 10_000, maxBytes: 256 << 20, ttlS: 86_400 });
 * await store.put({ owner: "", response, input, previous: null });
 */
import type { Json } from "../openai/fields";
import type { Item } from "./items";

export interface StoredResponse {
  owner: string;
  /** The Response object as returned (its id is the record's key). */
  response: Json & { id: string; output: Item[] };
  /** This request's input items (without the earlier turns'). */
  input: Item[];
  previous: string | null;
}

export interface ResponseStore {
  readonly kind: "memory" | "redis";
  get(id: string): Promise<StoredResponse | undefined>;
  put(r: StoredResponse): Promise<void>;
  /** True when there was such a record. */
  delete(id: string): Promise<boolean>;
}

export class ResponseNotFound extends Error {
  override readonly name = "ResponseNotFound";
  constructor(readonly id: string) {
    super(`Response with id '${id}' not found.`);
  }
}

export class ChainTooLong extends Error {
  override readonly name = "ChainTooLong";
}

/**
 * The items of the conversation before a new request that names `previous`: every earlier record's input and
 * output, oldest first. Throws ResponseNotFound for a missing (or another owner's) link, ChainTooLong past maxChain.
 */
export async function history(store: ResponseStore, previous: string, owner: string, maxChain: number): Promise<Item[]> {
  const chain: StoredResponse[] = [];
  for (let id: string | null = previous; id !== null; ) {
    if (chain.length >= maxChain) throw new ChainTooLong(`The conversation is more than ${maxChain} responses long (responses.max_chain).`);
    const r = await store.get(id);
    if (!r || r.owner !== owner) throw new ResponseNotFound(id);
    chain.push(r);
    id = r.previous;
  }
  return chain.reverse().flatMap((r) => [...r.input, ...r.response.output]);
}

export function createMemoryStore(o: { maxEntries: number; maxBytes: number; ttlS: number; now?: () => number }): ResponseStore {
  const now = o.now ?? Date.now;
  // insertion order is age order: the first key is the oldest; a record is kept as its JSON (its size known, and a
  // copy no caller can change)
  const records = new Map<string, { json: string; expires: number }>();
  let bytes = 0;
  const drop = (id: string) => {
    const e = records.get(id);
    if (!e) return undefined;
    records.delete(id);
    bytes -= e.json.length;
    return e;
  };
  return {
    kind: "memory",
    async get(id) {
      const e = records.get(id);
      if (!e) return undefined;
      if (e.expires <= now()) {
        drop(id);
        return undefined;
      }
      return JSON.parse(e.json) as StoredResponse;
    },
    async put(r) {
      drop(r.response.id);
      const json = JSON.stringify(r);
      records.set(r.response.id, { json, expires: now() + o.ttlS * 1000 });
      bytes += json.length;
      // the oldest go first; a record larger than the whole bound is not kept at all
      while (records.size > o.maxEntries || (bytes > o.maxBytes && records.size > 0)) drop(records.keys().next().value!);
    },
    async delete(id) {
      const e = drop(id);
      return !!e && e.expires > now();
    },
  };
}
