import { expect, test } from "bun:test";
import { createEngine } from "../engine/engine";
import type { LoadSnapshot } from "../engine/load-tracker";
import { createToyRunner } from "../engine/testing/toy-runner";
import { watchLoad } from "./watch-load";

test("reports at the interval, at once on a large load step, and stops on abort", async () => {
  const engine = createEngine({ runner: createToyRunner({ stepDelayMs: 20 }), blockSize: 4, numKvBlocks: 64, maxNumSeqs: 8, maxBatchTokens: 64, maxQueue: 8, serverId: "w" });
  const ctl = new AbortController();
  const seen: { at: number; load: LoadSnapshot }[] = [];
  const t0 = performance.now();
  const watching = (async () => {
    for await (const l of watchLoad(engine, 60_000, ctl.signal, (x) => x)) {
      seen.push({ at: performance.now() - t0, load: l });
      if (seen.length === 1) {
        // A burst of work: a big step in running + waiting.
        for (let i = 0; i < 4; i++) void (async () => { for await (const _ of engine.generate({ promptTokenIds: [1, 2, 3], stop: { maxTokens: 50 } })); })();
      }
      if (seen.length === 2) ctl.abort();
    }
  })();
  await Promise.race([watching, Bun.sleep(3000)]);
  expect(seen.length).toBe(2);
  expect(seen[0]!.load.running + seen[0]!.load.waiting).toBe(0);
  expect(seen[1]!.load.running + seen[1]!.load.waiting).toBeGreaterThanOrEqual(2);
  expect(seen[1]!.at).toBeLessThan(1000); // not the 60 s interval
  await engine.close();
});

test("without changes, reports come at the interval", async () => {
  const engine = createEngine({ runner: createToyRunner(), blockSize: 4, numKvBlocks: 8, maxNumSeqs: 2, maxBatchTokens: 8, maxQueue: 2, serverId: "w" });
  const ctl = new AbortController();
  const times: number[] = [];
  const t0 = performance.now();
  for await (const _ of watchLoad(engine, 30, ctl.signal, (x) => x)) {
    times.push(performance.now() - t0);
    if (times.length === 4) ctl.abort();
  }
  expect(times.length).toBe(4);
  expect(times[3]!).toBeGreaterThanOrEqual(85);
  expect(times[3]!).toBeLessThan(1000);
  await engine.close();
});
