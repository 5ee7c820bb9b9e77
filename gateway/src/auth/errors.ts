/**
 * Access-control errors, as the gateway's one error type (`GatewayError`), so
 * `http/on-error.ts` renders them in OpenAI's shape. The only addition is
 * `headers` on 429s (Retry-After, x-ratelimit-*): the renderer copies
 * `err.headers` onto the response when present.
 *
 * @example
 * throw new RateLimitError("tokens", 7, { "x-ratelimit-limit-tokens": "10000" });
 */
import { GatewayError, payloadTooLarge, unauthorized } from "../errors";

export type LimitKind = "requests" | "tokens";

export class RateLimitError extends GatewayError {
  readonly headers: Record<string, string>;
  constructor(
    readonly limit: LimitKind,
    readonly retryAfterSeconds: number,
    extraHeaders: Record<string, string> = {},
  ) {
    super(
      429,
      `Rate limit reached for ${limit} per minute on this API key. Try again in ${retryAfterSeconds}s.`,
      limit,
      "rate_limit_exceeded",
    );
    this.headers = { "retry-after": String(retryAfterSeconds), ...extraHeaders };
  }
}

export const missingKey = () => unauthorized("You didn't provide an API key. Send it as 'Authorization: Bearer <key>'.");
export const invalidKey = () => unauthorized("Incorrect API key provided.");
export const bodyTooLarge = (limit: number) => payloadTooLarge(limit);
