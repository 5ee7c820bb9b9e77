/** The paging parameters of OpenAI's list routes. */
import { badRequest } from "../errors";

/** `limit`: 1-100, default 20. */
export function limitOf(text: string | undefined): number {
  if (text === undefined) return 20;
  const n = Number(text);
  if (!/^\d+$/.test(text) || n < 1 || n > 100) throw badRequest(`'limit' must be an integer in 1..100, got ${JSON.stringify(text)}.`, "limit");
  return n;
}
