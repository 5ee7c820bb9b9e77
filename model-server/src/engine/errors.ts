/**
 * The engine's one error type. The RPC layer turns it into a Connect code at
 * one place (rpc/errors.ts).
 *
 * @example
 * throw new EngineError("resource_exhausted", "queue full (256 waiting)");
 */
export type EngineErrorCode = "invalid_argument" | "resource_exhausted" | "unavailable" | "not_found";

export class EngineError extends Error {
  constructor(
    readonly code: EngineErrorCode,
    message: string,
  ) {
    super(message);
    this.name = "EngineError";
  }
}
