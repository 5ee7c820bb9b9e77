/**
 * Request-size checks the HTTP layer runs before any work: a body cap enforced
 * while reading (Content-Length may be absent or lie; chunked bodies are
 * counted as they arrive and the read stops at the limit) and a prompt-length
 * check after tokenization.
 *
 * @example
 * const bytes = await readBodyLimited(c.req.raw, 4 << 20); // 413 past 4 MiB
 * checkPromptLength({ promptTokens: 9000, maxPromptTokens: 0, contextLength: 8192, maxOutputTokens: 16 }); // 400
 */
import { GatewayError } from "../errors";
import { bodyTooLarge } from "./errors";

/** Reads the whole body, refusing with 413 as soon as it passes `maxBytes`. */
export async function readBodyLimited(req: Request, maxBytes: number): Promise<Uint8Array> {
  const declared = Number(req.headers.get("content-length") ?? NaN);
  if (Number.isFinite(declared) && declared > maxBytes) throw bodyTooLarge(maxBytes);
  if (!req.body) return new Uint8Array(0);
  const reader = req.body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      total += value.byteLength;
      if (total > maxBytes) {
        await reader.cancel().catch(() => {});
        throw bodyTooLarge(maxBytes);
      }
      chunks.push(value);
    }
  } finally {
    reader.releaseLock();
  }
  const out = new Uint8Array(total);
  let at = 0;
  for (const c of chunks) (out.set(c, at), (at += c.byteLength));
  return out;
}

export interface PromptLengthCheck {
  promptTokens: number;
  /** Operator cap on prompt tokens; 0 = none. */
  maxPromptTokens: number;
  /** The model's context window; 0 = unknown. */
  contextLength: number;
  /** max_tokens / max_completion_tokens when given. */
  maxOutputTokens?: number;
  /** The request field holding the prompt ("messages" or "prompt"). */
  param?: string;
}

/** Throws OpenAI's 400 `context_length_exceeded` when the prompt does not fit. */
export function checkPromptLength(c: PromptLengthCheck): void {
  const param = c.param ?? "messages";
  if (c.maxPromptTokens > 0 && c.promptTokens > c.maxPromptTokens) {
    throw new GatewayError(
      400,
      `This gateway accepts at most ${c.maxPromptTokens} prompt tokens. However, your ${param} resulted in ${c.promptTokens} tokens. Please reduce the length of the ${param}.`,
      "invalid_request_error",
      "context_length_exceeded",
      param,
    );
  }
  const total = c.promptTokens + (c.maxOutputTokens ?? 0);
  if (c.contextLength > 0 && total > c.contextLength) {
    const out = c.maxOutputTokens ? ` (${c.promptTokens} in the ${param}, ${c.maxOutputTokens} in the completion)` : "";
    throw new GatewayError(
      400,
      `This model's maximum context length is ${c.contextLength} tokens. However, you requested ${total} tokens${out}. Please reduce the length of the ${param} or completion.`,
      "invalid_request_error",
      "context_length_exceeded",
      param,
    );
  }
}
