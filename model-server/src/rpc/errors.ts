/**
 * The one place engine errors become Connect errors. Anything that is not an
 * EngineError is a server bug: INTERNAL with its message.
 *
 * @example
 * try { engine.generate(p) } catch (e) { throw toConnectError(e) }
 */
import { Code, ConnectError } from "@connectrpc/connect";
import { EngineError, type EngineErrorCode } from "../engine/errors";

const CODES: Record<EngineErrorCode, Code> = {
  invalid_argument: Code.InvalidArgument,
  resource_exhausted: Code.ResourceExhausted,
  unavailable: Code.Unavailable,
  not_found: Code.NotFound,
};

export function toConnectError(e: unknown): ConnectError {
  if (e instanceof ConnectError) return e;
  if (e instanceof EngineError) return new ConnectError(e.message, CODES[e.code]);
  return new ConnectError(e instanceof Error ? e.message : String(e), Code.Internal);
}
