/**
 * The one place a GatewayError becomes an HTTP response: OpenAI's
 * `{error:{message,type,param,code}}` with the error's status (Anthropic's
 * `{type:"error",error:{type,message}}` on the Messages API's routes). Unknown
 * errors are logged with their stack and shown as a generic 500.
 */
import type { Context } from "hono";
import { anthropicErrorBody } from "../anthropic/errors";
import { toGatewayError } from "../errors";
import type { Logger } from "../log/logger";

export function errorResponse(err: unknown, log: Logger, shape: "openai" | "anthropic" = "openai"): Response {
  const ge = toGatewayError(err);
  if (ge.status >= 500) {
    const cause = ge.status === 500 ? (ge.cause as Error | undefined) : undefined;
    log.warn("request failed", { status: ge.status, code: ge.code, message: ge.message, ...(cause ? { cause: String(cause.stack ?? cause) } : {}) });
  }
  const headers: Record<string, string> = { "content-type": "application/json" };
  // 503 as well: no healthy backend (all down, or all ejected under overload) is worth a retry
  // shortly, and clients that honour Retry-After back off instead of hammering (RFC 9110 10.2.3).
  if (ge.status === 429 || ge.status === 503) headers["retry-after"] = "1";
  // Errors that carry headers (RateLimitError: Retry-After, x-ratelimit-*) add them.
  const extra = (ge as { headers?: Record<string, string> }).headers;
  if (extra) Object.assign(headers, extra);
  return new Response(JSON.stringify(shape === "anthropic" ? anthropicErrorBody(ge) : ge.toBody()), { status: ge.status, headers });
}

/** The error shape a route's clients read: Anthropic's on the Messages API's paths, else OpenAI's. */
export const errorShapeOf = (path: string): "openai" | "anthropic" => (path.startsWith("/v1/messages") ? "anthropic" : "openai");

export function createOnError(log: Logger) {
  return (err: Error, c: Context) => errorResponse(err, log, errorShapeOf(c.req.path));
}
