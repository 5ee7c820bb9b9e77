/** The paging parameters of OpenAI's list routes, and one page of a list by them. */
import { badRequest, GatewayError, serviceUnavailable } from "../errors";

/** `limit`: 1-100, default 20. */
export function limitOf(text: string | undefined): number {
  if (text === undefined) return 20;
  const n = Number(text);
  if (!/^\d+$/.test(text) || n < 1 || n > 100) throw badRequest(`'limit' must be an integer in 1..100, got ${JSON.stringify(text)}.`, "limit");
  return n;
}

/**
 * One page of `items` (oldest first) by the query's `order` (asc, or desc: the default), `limit` and `after` (an
 * item's id; one not in the list is a 400 naming `of`), as OpenAI's item lists answer it.
 */
export function itemPage<T extends Record<string, unknown>>(items: readonly T[], query: (name: string) => string | undefined, of: string) {
  const order = query("order") ?? "desc";
  if (order !== "asc" && order !== "desc") throw badRequest(`'order' must be "asc" or "desc", got ${JSON.stringify(order)}.`, "order");
  const limit = limitOf(query("limit"));
  const ordered = order === "asc" ? items : [...items].reverse();
  const after = query("after");
  const at = after === undefined ? -1 : ordered.findIndex((i) => i.id === after);
  if (after !== undefined && at < 0) throw badRequest(`'after' names no item of ${of}.`, "after");
  const data = ordered.slice(at + 1, at + 1 + limit);
  return { object: "list", data, first_id: data[0]?.id ?? null, last_id: data.at(-1)?.id ?? null, has_more: at + 1 + limit < ordered.length };
}

/**
 * A call to a store (Redis, memory): errors `keep` says are the caller's (GatewayErrors, and what the store reports
 * on purpose, such as a record not found) pass; any other (Redis down) is a 503, never a 500 or a silent loss.
 */
export async function storeCall<T>(what: string, op: () => Promise<T>, keep: (err: unknown) => boolean = () => false): Promise<T> {
  try {
    return await op();
  } catch (err) {
    if (err instanceof GatewayError || keep(err)) throw err;
    throw serviceUnavailable(`The ${what} is unavailable: ${(err as Error).message}`, false, err);
  }
}
