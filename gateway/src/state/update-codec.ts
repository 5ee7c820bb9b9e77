/**
 * Wire form of a RoutingUpdate between gateway replicas: compact JSON with
 * block hashes as hex. Decoding validates everything and returns undefined
 * for anything malformed (a bad message from another replica is dropped, it
 * never reaches the router). Request ids are namespaced by replica so two
 * replicas' ids can never collide.
 */
import type { RoutingUpdate } from "../routing/router";

interface Wire {
  v: 1;
  /** Publishing replica. */
  r: string;
  k: "routed" | "first-token" | "finished";
  id: string;
  b?: string;
  h?: string[];
  p?: number;
  a?: string;
}

export function encodeUpdate(replicaId: string, u: RoutingUpdate): string {
  const w: Wire = { v: 1, r: replicaId, k: u.kind, id: u.requestId };
  if (u.kind === "routed") {
    w.b = u.backendId;
    w.h = u.blockHashes.map((x) => x.toString(16));
    w.p = u.prefillTokens;
    if (u.affinityKey) w.a = u.affinityKey;
  }
  return JSON.stringify(w);
}

/** The update and the replica that sent it, or undefined when malformed. */
export function decodeUpdate(raw: string): { replicaId: string; update: RoutingUpdate } | undefined {
  let w: Partial<Wire>;
  try {
    w = JSON.parse(raw) as Partial<Wire>;
  } catch {
    return undefined;
  }
  if (!w || w.v !== 1 || typeof w.r !== "string" || typeof w.id !== "string") return undefined;
  const requestId = `${w.r}/${w.id}`;
  if (w.k === "first-token" || w.k === "finished") return { replicaId: w.r, update: { kind: w.k, requestId } };
  if (w.k !== "routed" || typeof w.b !== "string" || !Array.isArray(w.h) || typeof w.p !== "number" || !(w.p >= 0)) return undefined;
  const hashes: bigint[] = [];
  for (const x of w.h) {
    if (typeof x !== "string" || !/^[0-9a-f]{1,16}$/.test(x)) return undefined;
    hashes.push(BigInt(`0x${x}`));
  }
  return {
    replicaId: w.r,
    update: {
      kind: "routed",
      requestId,
      backendId: w.b,
      blockHashes: hashes,
      prefillTokens: w.p,
      affinityKey: typeof w.a === "string" ? w.a : undefined,
    },
  };
}
