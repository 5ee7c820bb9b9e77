/**
 * Reads a request body as text, refusing (413) anything over `limit` bytes
 * before reading it when Content-Length says so, and while reading otherwise.
 */
import { badRequest, payloadTooLarge } from "../errors";

export async function readBody(req: Request, limit: number): Promise<string> {
  const declared = req.headers.get("content-length");
  if (declared !== null && Number(declared) > limit) throw payloadTooLarge(limit);
  if (!req.body) throw badRequest("Request body is empty: send a JSON object.", null, "invalid_json");
  if (declared !== null) return req.text();
  const decoder = new TextDecoder();
  let size = 0;
  let text = "";
  for await (const chunk of req.body) {
    size += chunk.byteLength;
    if (size > limit) throw payloadTooLarge(limit);
    text += decoder.decode(chunk, { stream: true });
  }
  return text + decoder.decode();
}
