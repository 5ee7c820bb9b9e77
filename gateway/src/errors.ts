/**
 * The gateway's one error type. Every layer throws it (or has its own errors
 * converted into it at its edge: `rpc/` maps ConnectError, `workers/` maps
 * fetch failures), and exactly one place renders it: `http/on-error.ts` as
 * OpenAI's `{error:{message,type,param,code}}`, or `http/sse-response.ts` as a
 * final SSE error event once streaming began.
 *
 * @example
 * throw badRequest("n must be 1", "n", "unsupported_value");
 */
export class GatewayError extends Error {
  override readonly name = "GatewayError";
  constructor(
    readonly status: number,
    message: string,
    readonly type: string,
    readonly code: string | null = null,
    readonly param: string | null = null,
    /** True when another backend might succeed (only before the first token). */
    readonly retryable = false,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }

  /** OpenAI's error body. */
  toBody(): { error: { message: string; type: string; param: string | null; code: string | null } } {
    return { error: { message: this.message, type: this.type, param: this.param, code: this.code } };
  }
}

export const badRequest = (message: string, param: string | null = null, code: string | null = "invalid_value") =>
  new GatewayError(400, message, "invalid_request_error", code, param);

export const unauthorized = (message = "Incorrect or missing API key. Send it as 'Authorization: Bearer <key>'.") =>
  new GatewayError(401, message, "invalid_request_error", "invalid_api_key");

export const modelNotFound = (model: string) =>
  new GatewayError(404, `The model '${model}' does not exist or is not served by this gateway.`, "invalid_request_error", "model_not_found", "model");

export const routeNotFound = (method: string, path: string) =>
  new GatewayError(404, `Unknown route: ${method} ${path}`, "invalid_request_error", "unknown_url");

export const payloadTooLarge = (limit: number) =>
  new GatewayError(413, `Request body is larger than the limit of ${limit} bytes.`, "invalid_request_error", "request_too_large");

export const tooManyRequests = (message: string, retryable = false) =>
  new GatewayError(429, message, "requests", "rate_limit_exceeded", null, retryable);

export const badGateway = (message: string, retryable = true, cause?: unknown) =>
  new GatewayError(502, message, "server_error", "upstream_error", null, retryable, { cause });

export const serviceUnavailable = (message: string, retryable = true, cause?: unknown) =>
  new GatewayError(503, message, "server_error", "upstream_unavailable", null, retryable, { cause });

export const gatewayTimeout = (message: string, cause?: unknown) =>
  new GatewayError(504, message, "server_error", "upstream_timeout", null, false, { cause });

/** Anything thrown that is not a GatewayError becomes a 500 that hides internals. */
export function toGatewayError(err: unknown): GatewayError {
  if (err instanceof GatewayError) return err;
  return new GatewayError(500, "Internal gateway error.", "server_error", "internal_error", null, false, { cause: err });
}
