/**
 * How ranks exchange bytes. One collective: all-to-all with a variable size per
 * peer (NCCL: ncclSend/ncclRecv to every peer inside one group; here: shared
 * memory between worker threads). Blocking and collective: every rank of the
 * group calls it the same number of times in the same order, also with empty
 * messages (a rank with no tokens still takes part in each MoE layer).
 *
 * @example
 *   const recv = transport.allToAllV(send);   // send[d] -> rank d; recv[s] came from rank s
 */
export interface Transport {
  readonly rank: number;
  readonly size: number;
  allToAllV(send: Uint8Array[]): Uint8Array[];
}

/**
 * The all-to-all of a whole group computed in one place: recv[d][s] = send[s][d].
 * Lets a test drive N ranks' pure phases in lockstep on one thread.
 */
export function allToAllLockstep(send: Uint8Array[][]): Uint8Array[][] {
  const N = send.length;
  for (const row of send) if (row.length !== N) throw new RangeError(`every rank must send to all ${N} ranks`);
  return Array.from({ length: N }, (_, d) => Array.from({ length: N }, (_, s) => send[s]![d]!));
}
