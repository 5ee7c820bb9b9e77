/**
 * The router against one real CPU model server: its KV events, hashed by the
 * server, must land in the gateway's index under the hashes the gateway
 * computes for the same tokens (common/src/block-hash.ts), and the cache hit
 * the index predicts must be the one the server reports.
 */
import { afterAll, expect, test } from "bun:test";
import { hashBlocks, rootHash } from "@dispatch/common/src/block-hash";
import { createRouter } from "@dispatch/gateway/src/routing/router";
import { createModelClient } from "@dispatch/gateway/src/rpc/model-client";
import { bundledModelDir, startServer, type RunningServer } from "@dispatch/model-server/test/harness";

let server: RunningServer | undefined;
const abort = new AbortController();
afterAll(async () => {
  abort.abort();
  await server?.stop();
});

test("KV events from a real model server predict its cache hits", async () => {
  server = await startServer({ model: bundledModelDir(), args: ["--block-size", "16", "--kv-blocks", "64", "--server-id", "ms-0"] });
  const client = createModelClient({ url: server.url, protocol: "connect" });
  const info = await client.modelInfo(AbortSignal.timeout(5000));
  const router = createRouter({ policy: "dispatch", blockSize: info.blockSize });
  router.addBackend("ms-0", "exact");
  router.onKvStreamStart("ms-0", true);
  let batches = 0;
  void (async () => {
    try {
      for await (const b of client.watchKvEvents(true, abort.signal)) {
        router.onKvEvents("ms-0", b);
        batches++;
      }
    } catch {
      // ends with the test
    }
  })();

  const shared = Array.from({ length: 64 }, (_, i) => 100 + i);
  const prompt = (tail: number) => [...shared, ...Array.from({ length: 20 }, (_, i) => 1000 + tail * 37 + i)];
  const generate = async (tokens: number[], id: string) => {
    let cached = -1;
    for await (const step of client.generate({ requestId: id, model: info.modelId, promptTokenIds: Uint32Array.from(tokens), temperature: 0, maxTokens: 2, stopTokenIds: [], ignoreEos: true }, AbortSignal.timeout(20_000))) {
      if (step.usage) cached = step.usage.cachedPromptTokens;
    }
    return cached;
  };
  const root = rootHash(info.modelId);
  const req = (tokens: number[]) => ({ blockHashes: hashBlocks(tokens, info.blockSize, root), promptTokens: tokens.length, blockSize: info.blockSize });

  expect(await generate(prompt(1), "a")).toBe(0);
  const second = req(prompt(2));
  const until = Date.now() + 5000;
  while (router.views(second)[0]!.matchedBlocks === 0 && Date.now() < until) await Bun.sleep(10);
  const predicted = router.views(second)[0]!.matchedBlocks!;
  expect(batches).toBeGreaterThan(0);
  expect(predicted).toBe(4); // the 64 shared tokens: 4 blocks of 16
  expect(await generate(prompt(2), "b")).toBe(predicted * info.blockSize);
}, 60_000);
