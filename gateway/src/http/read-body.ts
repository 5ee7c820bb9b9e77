/**
 * Reads a request body as text, refusing (413) anything over `limit` bytes:
 * before reading when Content-Length says so, after reading otherwise (Bun's
 * own `maxRequestBodySize`, set a little above the limit in gateway.ts,
 * bounds what a chunked body can make us buffer). Bytes that are not valid
 * UTF-8 are a 400, never silently replaced.
 */
import { badRequest, payloadTooLarge } from "../errors";

const decoder = new TextDecoder("utf-8", { fatal: true });

export async function readBody(req: Request, limit: number): Promise<string> {
  const declared = req.headers.get("content-length");
  if (declared !== null && Number(declared) > limit) throw payloadTooLarge(limit);
  if (!req.body) throw badRequest("Request body is empty: send a JSON object.", null, "invalid_json");
  const bytes = await req.bytes();
  if (bytes.byteLength > limit) throw payloadTooLarge(limit);
  try {
    return decoder.decode(bytes);
  } catch {
    throw badRequest("Request body is not valid UTF-8.", null, "invalid_encoding");
  }
}
