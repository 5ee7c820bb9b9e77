import { describe, expect, test } from "bun:test";
import { createLoopbackShared, createLoopbackTransport } from "./loopback-transport";
import { allToAllLockstep } from "./transport";
import { decodeMessage, encodeMessage } from "./wire";

describe("loopback transport", () => {
  test("all-to-all across worker threads: recv[s] is what rank s sent here, repeatedly", async () => {
    const N = 3;
    const shared = createLoopbackShared(N, 4096);
    const src = `
      import { createLoopbackTransport } from ${JSON.stringify(new URL("./loopback-transport.ts", import.meta.url).pathname)};
      self.onmessage = (ev) => {
        const { shared, rank, rounds } = ev.data;
        const t = createLoopbackTransport(shared, rank, 5000);
        const seen = [];
        for (let round = 0; round < rounds; round++) {
          const send = Array.from({ length: shared.size }, (_, d) => Uint8Array.from({ length: rank + d + round }, () => rank * 16 + d));
          seen.push(t.allToAllV(send).map((m) => [m.length, m[0] ?? -1]));
        }
        self.postMessage(seen);
      };`;
    const url = URL.createObjectURL(new Blob([src], { type: "text/javascript" }));
    const results = await Promise.all(
      Array.from({ length: N }, (_, rank) => {
        const w = new Worker(url);
        return new Promise<number[][][]>((resolve, reject) => {
          w.onmessage = (ev) => {
            resolve(ev.data);
            w.terminate();
          };
          w.onerror = (e) => reject(new Error(e.message));
          w.postMessage({ shared, rank, rounds: 4 });
        });
      }),
    );
    results.forEach((seen, rank) =>
      seen.forEach((recv, round) => expect(recv).toEqual(Array.from({ length: N }, (_, s) => [s + rank + round, s + rank + round > 0 ? s * 16 + rank : -1]))),
    );
  });
  test("a peer that never arrives is a transport error within the timeout; an oversized message a capacity error", () => {
    const shared = createLoopbackShared(2, 16);
    const t = createLoopbackTransport(shared, 0, 50);
    const t0 = Date.now();
    expect(() => t.allToAllV([new Uint8Array(1), new Uint8Array(1)])).toThrow(/did not reach the barrier within 50 ms/);
    expect(Date.now() - t0).toBeLessThan(2000);
    expect(() => createLoopbackTransport(createLoopbackShared(2, 16), 1, 50).allToAllV([new Uint8Array(17), new Uint8Array(0)])).toThrow(/exceed the 16-byte mailbox/);
  });
  test("lockstep all-to-all and message encoding", () => {
    const m = (v: number) => encodeMessage(Int32Array.of(v), Float32Array.of(v / 2));
    const recv = allToAllLockstep([[m(0), m(1)], [m(10), m(11)]]);
    expect(recv.map((r) => r.map((b) => decodeMessage(b).ints[0]))).toEqual([[0, 10], [1, 11]]);
    expect(decodeMessage(m(3)).floats[0]).toBe(1.5);
    expect(() => decodeMessage(new Uint8Array(10))).toThrow(/does not match/);
  });
});

test("abort releases a peer waiting at the barrier at once, and later calls fail too", () => {
  const shared = createLoopbackShared(2, 16);
  const t0 = createLoopbackTransport(shared, 0, 10_000);
  createLoopbackTransport(shared, 1, 10_000).abort();
  const start = Date.now();
  expect(() => t0.allToAllV([new Uint8Array(0), new Uint8Array(0)])).toThrow(/a peer failed this step/);
  expect(Date.now() - start).toBeLessThan(1000);
});
