/**
 * The prefix-cache check device-serve.ts makes per run, against a real CPU model server with the
 * bundled model: the same prompts sent a second time (what the old device-serve did: the direct
 * run reused the gateway run's seed) show up as cached prompt tokens; a run with its own seed
 * shows none.
 */
import { afterAll, expect, test } from "bun:test";
import { join } from "node:path";
import { freePort, ROOT, start, stopAll, waitReady, type Proc } from "../gateway/processes";
import { runBench } from "./serve-bench";
import { counterValue, promptCounters } from "./server-metrics";

const MODEL = join(ROOT, "model-server", "models", "tiny-wordnet-moe");
const procs: Proc[] = [];
afterAll(() => stopAll(procs));

test("counterValue reads a Prometheus counter, 0 when absent", () => {
  const text = "# HELP x_total x\n# TYPE x_total counter\nx_total 42\ny_total{a=\"b\"} 7\nx_total_other 9\n";
  expect(counterValue(text, "x_total")).toBe(42);
  expect(counterValue(text, "y_total")).toBe(7);
  expect(counterValue(text, "z_total")).toBe(0);
});

test("a run that resends earlier prompts hits the prefix cache; a fresh seed does not", async () => {
  const port = await freePort();
  const server = start("model-server", ["model-server/src/main.ts", "--model", MODEL, "--port", String(port), "--backend", "cpu"], port);
  procs.push(server);
  const url = `http://127.0.0.1:${port}`;
  await waitReady(server, () => fetch(`${url}/readyz`), 30_000);
  const run = (seed: number) => runBench({ baseUrl: url, target: "rpc", model: "tiny-wordnet-moe", numPrompts: 3, inputLen: 40, outputLen: 2, requestRate: Infinity, maxConcurrency: 3, vocab: 4000, seed });
  const hits = async (seed: number) => {
    const before = await promptCounters(url);
    const r = await run(seed);
    expect(r.errors).toEqual([]);
    const after = await promptCounters(url);
    expect(after.promptTokens - before.promptTokens).toBe(120);
    return after.cachedTokens - before.cachedTokens;
  };
  expect(await hits(1)).toBe(0);
  // 40-token prompts: 2 full 16-token blocks each are reusable (never the block of the last token)
  expect(await hits(1)).toBe(3 * 32);
  expect(await hits(2)).toBe(0);
}, 60_000);
