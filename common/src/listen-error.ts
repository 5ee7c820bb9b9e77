/**
 * A server's failure to listen, in words for its log: the port taken, no permission for it, or an address this host
 * does not have. Anything else (not a listen failure) gives undefined, for the caller to rethrow.
 */
export function describeListenError(err: unknown, host: string, port: number): string | undefined {
  const e = err as { code?: unknown; address?: unknown; port?: unknown } | null;
  const code = e?.code;
  // node:net's errors name the address they failed on (a second listener's port); Bun.serve's do not
  const at = `${typeof e?.address === "string" ? e.address : host}:${typeof e?.port === "number" ? e.port : port}`;
  if (code === "EADDRINUSE") return `cannot listen on ${at}: the port is in use (another server, or a previous one still stopping)`;
  if (code === "EACCES") return `cannot listen on ${at}: no permission for this port (below 1024 needs privileges)`;
  if (code === "EADDRNOTAVAIL") return `cannot listen on ${at}: this host has no such address`;
  return undefined;
}
