/**
 * Reads a request body as text, refusing (413) anything over `limit` bytes
 * before reading it when Content-Length says so, and while reading otherwise.
 * The body must be UTF-8 (RFC 8259): invalid bytes are a 400, not silently
 * replaced with U+FFFD and sent to the model.
 */
import { badRequest, payloadTooLarge } from "../errors";

const notUtf8 = () => badRequest("Request body is not valid UTF-8.", null, "invalid_json");

export async function readBody(req: Request, limit: number): Promise<string> {
  const declared = req.headers.get("content-length");
  if (declared !== null && Number(declared) > limit) throw payloadTooLarge(limit);
  if (!req.body) throw badRequest("Request body is empty: send a JSON object.", null, "invalid_json");
  const decoder = new TextDecoder("utf-8", { fatal: true });
  try {
    if (declared !== null) return decoder.decode(await req.arrayBuffer());
    let size = 0;
    let text = "";
    for await (const chunk of req.body) {
      size += chunk.byteLength;
      if (size > limit) throw payloadTooLarge(limit);
      text += decoder.decode(chunk, { stream: true });
    }
    return text + decoder.decode();
  } catch (err) {
    if (err instanceof TypeError) throw notUtf8();
    throw err;
  }
}
