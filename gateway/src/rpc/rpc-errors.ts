/**
 * The one conversion of RPC failures into GatewayError. Before the first
 * token, UNAVAILABLE / RESOURCE_EXHAUSTED / transport failures are retryable
 * on another backend; INVALID_ARGUMENT is the client's fault and is not.
 */
import { Code, ConnectError } from "@connectrpc/connect";
import {
  badGateway,
  badRequest,
  GatewayError,
  gatewayTimeout,
  serviceUnavailable,
  tooManyRequests,
} from "../errors";

export function fromRpcError(err: unknown, where: string): GatewayError {
  if (err instanceof GatewayError) return err;
  const ce = ConnectError.from(err);
  const msg = ce.rawMessage || ce.message;
  switch (ce.code) {
    case Code.InvalidArgument:
    case Code.OutOfRange:
    case Code.FailedPrecondition:
      return badRequest(`The model server rejected the request: ${msg}`, null, "invalid_request");
    case Code.ResourceExhausted:
      return tooManyRequests(`Model server ${where} is overloaded: ${msg}`, true);
    case Code.Unavailable:
      return serviceUnavailable(`Model server ${where} is unavailable: ${msg}`, true, ce);
    case Code.DeadlineExceeded:
      return gatewayTimeout(`Model server ${where} did not answer in time: ${msg}`, ce);
    case Code.Canceled:
      return new GatewayError(499, "The request was cancelled.", "server_error", "cancelled", null, false, { cause: ce });
    default:
      return badGateway(`Model server ${where} failed (${Code[ce.code]}): ${msg}`, true, ce);
  }
}
