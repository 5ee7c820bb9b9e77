/**
 * Anthropic's error shape, `{"type": "error", "error": {"type": ..., "message": ...}}`, for the Messages API's
 * routes: the gateway's one error type (GatewayError) rendered by status, as Anthropic's API types them.
 *
 * @example
 * anthropicErrorBody(badRequest("'max_tokens' is required.")); // {type: "error", error: {type: "invalid_request_error", ...}}
 */
import type { GatewayError } from "../errors";

export function anthropicErrorType(status: number): string {
  if (status === 400) return "invalid_request_error";
  if (status === 401) return "authentication_error";
  if (status === 403) return "permission_error";
  if (status === 404) return "not_found_error";
  if (status === 413) return "request_too_large";
  if (status === 429) return "rate_limit_error";
  if (status === 503) return "overloaded_error";
  return status < 500 ? "invalid_request_error" : "api_error";
}

export function anthropicErrorBody(err: GatewayError): { type: "error"; error: { type: string; message: string } } {
  return { type: "error", error: { type: anthropicErrorType(err.status), message: err.message } };
}
