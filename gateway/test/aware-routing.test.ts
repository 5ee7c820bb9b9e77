/**
 * The aware router's per-request bookkeeping through the real HTTP path: a
 * retry elsewhere moves the request's in-flight count to the new backend, and
 * a finished or cancelled request leaves none behind.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { parseCompletionRequest } from "../src/openai/parse-completion";
import type { RouteRequest } from "../src/routing/policy";
import type { AwareRouter } from "../src/workers/aware-router";
import type { ConnectFake } from "./fakes/connect-fake";
import type { TestGateway } from "./start-gateway";
import { startGatewayOverTwoFakes, type TwoFakes } from "./two-fakes";

let f: TwoFakes;
let x: ConnectFake;
let y: ConnectFake;
let t: TestGateway;
const prompt = "a prompt long enough to fill a few blocks of the fake's byte tokenizer, so the hash ring decides";

beforeAll(async () => {
  f = await startGatewayOverTwoFakes({
    // Deterministic for a prompt with full blocks, so the test knows the first choice.
    routing: { policy: "consistent-hash" },
    retry: { max_attempts: 2, backoff_ms: 5, max_backoff_ms: 5 },
    logging: { requests: false },
  });
  ({ x, y, t } = f);
});
afterAll(() => f.stop());

const router = () => t.gw.router as AwareRouter;
function routeReq(): RouteRequest {
  const req = parseCompletionRequest(JSON.stringify({ model: "fake-moe", prompt }));
  const profile = t.gw.pool.profile("fake-moe")!;
  const p = profile.prepare(req);
  return { blockHashes: p.blockHashes, promptTokens: p.tokenIds.length, blockSize: profile.blockSize };
}
const outstanding = () => Object.fromEntries(router().core.views(routeReq()).map((v) => [v.id, v.outstanding]));

test("a retry elsewhere moves the in-flight count; the finish clears it once", async () => {
  const rr = routeReq();
  expect(rr.blockHashes.length).toBeGreaterThan(0);
  const first = t.gw.router.pick("fake-moe", rr, new Set())!.member.backend.id;
  const [bad, good] = first === "x" ? [x, y] : [y, x];
  bad.failBeforeFirst = 1;
  good.pauseAt = 2;
  good.pauseMs = 300;
  const res = await fetch(`${t.url}/v1/completions`, { method: "POST", body: JSON.stringify({ model: "fake-moe", prompt, stream: true }) });
  const reader = res.body!.getReader();
  await reader.read();
  expect(bad.failBeforeFirst).toBe(0);
  expect(outstanding()).toEqual({ [first]: 0, [good === x ? "x" : "y"]: 1 });
  while (!(await reader.read()).done);
  expect(outstanding()).toEqual({ x: 0, y: 0 });
  good.pauseAt = -1;
});

test("a client that goes away mid-stream leaves nothing in flight", async () => {
  x.pauseAt = y.pauseAt = 1;
  x.pauseMs = y.pauseMs = 2000;
  const ctl = new AbortController();
  const res = await fetch(`${t.url}/v1/completions`, { method: "POST", body: JSON.stringify({ model: "fake-moe", prompt, stream: true }), signal: ctl.signal });
  await res.body!.getReader().read();
  expect(Object.values(outstanding()).reduce((a, b) => a + b, 0)).toBe(1);
  ctl.abort();
  const until = Date.now() + 2000;
  while (Object.values(outstanding()).some((n) => n !== 0) && Date.now() < until) await Bun.sleep(10);
  expect(outstanding()).toEqual({ x: 0, y: 0 });
  x.pauseAt = y.pauseAt = -1;
});
