import { expect, test } from "bun:test";
import { decodeUpdate, encodeUpdate } from "./update-codec";

test("routing updates survive the wire, request ids namespaced by replica", () => {
  const raw = encodeUpdate("gw-1", { kind: "routed", requestId: "r1", backendId: "b", blockHashes: [0n, 0xffffffffffffffffn, 42n], prefillTokens: 99, affinityKey: "u" });
  expect(decodeUpdate(raw)).toEqual({
    replicaId: "gw-1",
    update: { kind: "routed", requestId: "gw-1/r1", backendId: "b", blockHashes: [0n, 0xffffffffffffffffn, 42n], prefillTokens: 99, affinityKey: "u" },
  });
  expect(decodeUpdate(encodeUpdate("gw-1", { kind: "finished", requestId: "r1" }))?.update).toEqual({ kind: "finished", requestId: "gw-1/r1" });
});

test("malformed messages decode to undefined", () => {
  for (const bad of ["", "{", "null", '{"v":2,"r":"a","k":"finished","id":"x"}', '{"v":1,"r":"a","k":"routed","id":"x","b":"b","h":["zz"],"p":1}', '{"v":1,"r":"a","k":"routed","id":"x","b":"b","h":["1"],"p":-1}', '{"v":1,"r":"a","k":"other","id":"x"}']) {
    expect(decodeUpdate(bad)).toBeUndefined();
  }
});
