/**
 * Reference point for the benchmark: the least a Bun proxy can do (read the
 * body, fetch the upstream, pipe its body back natively). No validation,
 * routing, retries, cancellation, metrics or logs. Its added latency is the
 * cost of one extra Bun hop on this machine; dispatch's figures are read
 * against it.
 *
 *   bun bench/gateway/minimal-proxy.ts --port N --upstream http://127.0.0.1:U/v1
 */
import { forwardOpenAI, serveProxy } from "./serve-proxy";

serveProxy(forwardOpenAI);
