/**
 * A real model server's routing feeds follow its health: when it dies the
 * gateway ejects it and drops it from the router (streams stopped); when it
 * comes back on the same address new streams start and its KV events reach
 * the index again.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { type ModelServerHandle, startModelServer } from "../../test/support/model-server";
import type { AwareRouter } from "../src/workers/aware-router";
import { startGateway, type TestGateway } from "./start-gateway";

let ms: ModelServerHandle;
let t: TestGateway;

beforeAll(async () => {
  ms = await startModelServer({ args: ["--block-size", "16"] });
  t = await startGateway({
    routing: { policy: "dispatch" },
    health: { interval_ms: 100, timeout_ms: 300, unhealthy_after: 1, healthy_after: 1 },
    backends: [{ id: "ms", kind: "dispatch", url: ms.url }],
    logging: { requests: false },
  });
}, 30_000);
afterAll(async () => {
  await t?.stop();
  await ms?.stop();
});

async function until(what: string, ok: () => boolean, ms = 8000): Promise<void> {
  const end = Date.now() + ms;
  while (!ok()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await Bun.sleep(10);
  }
}

test("ejected: out of the router; back: new streams fill the index again", async () => {
  const core = (t.gw.router as AwareRouter).core;
  const model = (await t.client.models.list()).data[0]!.id;
  const prompt = Array.from({ length: 80 }, (_, i) => ["amber", "cloud", "ridge", "lantern"][i % 4]).join(" ");
  await t.client.completions.create({ model, prompt, max_tokens: 2 });
  await until("blocks in the index", () => core.index.size("ms") >= 2);

  await ms.kill();
  await until("ejection", () => !t.gw.pool.get("ms")!.healthy);
  expect(core.backendIds()).toEqual([]);
  expect(core.index.size("ms")).toBe(0);

  await ms.restart();
  await until("return", () => t.gw.pool.get("ms")!.healthy);
  expect(core.backendIds()).toEqual(["ms"]);
  // A restarted server holds nothing; its new stream reports what the next request stores.
  await t.client.completions.create({ model, prompt: `${prompt} again`, max_tokens: 2 });
  await until("blocks from the new stream", () => core.index.size("ms") >= 2);
}, 20_000);
