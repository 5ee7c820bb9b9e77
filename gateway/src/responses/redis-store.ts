/**
 * Stored responses in Redis, shared by every gateway replica: one JSON value per response under
 * `dispatch:resp:<id>`, expiring after the configured time.
 *
 * @example
 * const store = createRedisStore(new Redis(url), { ttlS: 86_400 });
 */
import type Redis from "ioredis";
import type { ResponseStore, StoredResponse } from "./store";

export function createRedisStore(redis: Redis, o: { ttlS: number; prefix?: string }): ResponseStore {
  const key = (id: string) => `${o.prefix ?? "dispatch:resp:"}${id}`;
  return {
    kind: "redis",
    async get(id) {
      const v = await redis.get(key(id));
      return v === null ? undefined : (JSON.parse(v) as StoredResponse);
    },
    async put(r) {
      await redis.set(key(r.response.id), JSON.stringify(r), "EX", o.ttlS);
    },
    async delete(id) {
      return (await redis.del(key(id))) > 0;
    },
  };
}
