/**
 * Loopback transport: the ranks of a group are threads of one process (the main
 * thread and/or workers) sharing one SharedArrayBuffer. Each ordered pair
 * (src, dst) has a mailbox; an all-to-all writes every outgoing mailbox, meets
 * the others at a barrier, copies its incoming mailboxes out, and meets them
 * again so nobody overwrites a mailbox still being read. Waits are bounded
 * (timeoutMs): a peer that never arrives becomes an EpError("transport"). A rank whose step
 * failed calls abort(): peers waiting at (or later reaching) a barrier fail at once instead of
 * waiting out the timeout; the group is then unusable.
 *
 * @example
 *   const shared = createLoopbackShared(4, 1 << 20);   // 4 ranks, 1 MiB per mailbox
 *   // hand `shared` to each rank's thread (postMessage), then in rank r:
 *   const t = createLoopbackTransport(shared, r);
 *   const recv = t.allToAllV(send);
 */
import { EpError } from "./errors";
import type { Transport } from "./transport";

export interface LoopbackShared {
  size: number;
  mailboxBytes: number;
  /** [arrived, generation, aborted, pad] then N*N mailboxes of (4-byte length + mailboxBytes). */
  buffer: SharedArrayBuffer;
}

const CTRL_BYTES = 16;

export function createLoopbackShared(size: number, mailboxBytes: number): LoopbackShared {
  if (!(Number.isInteger(size) && size > 0)) throw new EpError("transport", `group size must be a positive integer, got ${size}`);
  const mb = Math.ceil(mailboxBytes / 4) * 4;
  return { size, mailboxBytes: mb, buffer: new SharedArrayBuffer(CTRL_BYTES + size * size * (4 + mb)) };
}

export interface LoopbackTransport extends Transport {
  /** Marks the group failed and wakes every waiting peer (their allToAllV throws). */
  abort(): void;
}

export function createLoopbackTransport(shared: LoopbackShared, rank: number, timeoutMs = 30_000): LoopbackTransport {
  const N = shared.size;
  if (!(rank >= 0 && rank < N)) throw new EpError("transport", `rank ${rank} outside a group of ${N}`);
  const ctrl = new Int32Array(shared.buffer, 0, 3);
  const stride = 4 + shared.mailboxBytes;
  const box = (src: number, dst: number) => CTRL_BYTES + (src * N + dst) * stride;
  const lengths = new Int32Array(shared.buffer);
  const bytes = new Uint8Array(shared.buffer);

  const aborted = () => {
    if (Atomics.load(ctrl, 2) !== 0) throw new EpError("transport", "a peer failed this step; the group is unusable");
  };

  function barrier() {
    aborted();
    const gen = Atomics.load(ctrl, 1);
    if (Atomics.add(ctrl, 0, 1) === N - 1) {
      Atomics.store(ctrl, 0, 0);
      Atomics.add(ctrl, 1, 1);
      Atomics.notify(ctrl, 1);
      return;
    }
    const deadline = Date.now() + timeoutMs;
    while (Atomics.load(ctrl, 1) === gen) {
      aborted();
      const left = deadline - Date.now();
      if (left <= 0 || Atomics.wait(ctrl, 1, gen, left) === "timed-out") {
        if (Atomics.load(ctrl, 1) !== gen) return;
        throw new EpError("transport", `peers did not reach the barrier within ${timeoutMs} ms`);
      }
    }
  }

  return {
    rank,
    size: N,
    abort() {
      Atomics.store(ctrl, 2, 1);
      Atomics.notify(ctrl, 1);
    },
    allToAllV(send) {
      if (send.length !== N) throw new EpError("transport", `rank ${rank} sends ${send.length} messages to a group of ${N}`);
      for (let d = 0; d < N; d++) {
        const m = send[d]!;
        if (m.byteLength > shared.mailboxBytes) throw new EpError("capacity", `rank ${rank} -> ${d}: ${m.byteLength} bytes exceed the ${shared.mailboxBytes}-byte mailbox`);
        const at = box(rank, d);
        lengths[at / 4] = m.byteLength;
        bytes.set(m, at + 4);
      }
      barrier();
      const recv: Uint8Array[] = [];
      for (let s = 0; s < N; s++) {
        const at = box(s, rank);
        recv.push(bytes.slice(at + 4, at + 4 + lengths[at / 4]!));
      }
      barrier();
      return recv;
    },
  };
}
