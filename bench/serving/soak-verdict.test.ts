/**
 * The soak's verdict fails on each way a production server can go wrong under traffic: a hung
 * request, a wrong status, a short ignore_eos completion, a refusal outside OpenAI's error shape,
 * a leaked KV block, a server that is not ready, a greedy probe that changed.
 */
import { expect, test } from "bun:test";
import type { SoakRecord } from "./soak-client";
import type { SoakRequest } from "./soak-mix";
import { checkRecord, soakVerdict, type DrainState } from "./soak-verdict";

const req = (over: Partial<SoakRequest> = {}): SoakRequest => ({ index: 0, kind: "stream", path: "/v1/completions", body: {}, stream: true, expectStatus: 200, maxTokens: 8, label: "stream greedy", ...over });
const rec = (over: Partial<SoakRecord> = {}): SoakRecord => ({ index: 0, kind: "stream", label: "stream greedy", stream: true, status: 200, finishReason: "length", outputTokens: 8, contentChunks: 8, logprobChunks: 0, text: "abc", finishes: {}, texts: {}, cancelled: false, timedOut: false, durationMs: 5, ...over });
const clean: DrainState = { running: 0, waiting: 0, kvBlocksUsed: 0, ready: true, serverExited: false };

test("several choices must each finish; JSON mode's stop must be one object", () => {
  const three = req({ choices: 3, maxTokens: 4, label: "plain n=3" });
  expect(checkRecord(three, rec({ finishes: { 0: "stop", 1: "length", 2: "length" }, outputTokens: 10 }))).toEqual([]);
  expect(checkRecord(three, rec({ finishes: { 0: "stop", 2: "length" }, outputTokens: 10 }))).toEqual(["#0 plain n=3: choice 1: finish reason missing"]);
  expect(checkRecord(three, rec({ finishes: { 0: "stop", 1: "stop", 2: "stop" }, outputTokens: 13 }))).toEqual(["#0 plain n=3: 13 tokens, max_tokens 12"]);
  const json = req({ json: true, label: "chat json" });
  expect(checkRecord(json, rec({ finishReason: "stop", texts: { 0: '{"a": 1}' }, outputTokens: 5 }))).toEqual([]);
  expect(checkRecord(json, rec({ finishReason: "stop", texts: { 0: '{"a": ' }, outputTokens: 5 }))[0]).toContain("not one JSON object");
  expect(checkRecord(json, rec({ finishReason: "length", texts: { 0: '{"a": ' }, outputTokens: 8 }))).toEqual([]);
});

test("a completed request passes; each fault is named", () => {
  expect(checkRecord(req(), rec())).toEqual([]);
  expect(checkRecord(req(), rec({ finishReason: "stop", outputTokens: 0 }))).toEqual([]);
  expect(checkRecord(req(), rec({ timedOut: true }))[0]).toContain("hung");
  expect(checkRecord(req(), rec({ status: 500, error: "boom" }))[0]).toContain("HTTP 500: boom");
  expect(checkRecord(req(), rec({ error: "stream error" }))[0]).toContain("stream error");
  expect(checkRecord(req(), rec({ finishReason: undefined }))[0]).toContain("finish reason missing");
  expect(checkRecord(req(), rec({ outputTokens: undefined }))[0]).toContain("no usage");
  expect(checkRecord(req(), rec({ outputTokens: 9 }))[0]).toContain("9 tokens, max_tokens 8");
  expect(checkRecord(req(), rec({ outputTokens: 0, finishReason: "length" }))[0]).toContain("no tokens");
});

test("usage must count a token-id prompt's tokens", () => {
  expect(checkRecord(req({ promptTokens: 12 }), rec({ promptTokens: 12 }))).toEqual([]);
  expect(checkRecord(req({ promptTokens: 12 }), rec({ promptTokens: 11 }))[0]).toContain("usage.prompt_tokens 11, the prompt has 12");
  expect(checkRecord(req({ promptTokens: 12 }), rec({}))[0]).toContain("usage.prompt_tokens missing");
  expect(checkRecord(req(), rec({ promptTokens: 5 }))).toEqual([]); // chat: no token-id prompt to compare
});

test("ignore_eos without stops must come back exactly max_tokens long, finish length", () => {
  expect(checkRecord(req({ exactLength: true }), rec())).toEqual([]);
  expect(checkRecord(req({ exactLength: true }), rec({ outputTokens: 5, finishReason: "stop" }))[0]).toContain("expected exactly 8");
});

test("a refusal needs its status and OpenAI's error shape", () => {
  const bad = req({ kind: "invalid", expectStatus: 404, label: "invalid unknown model" });
  expect(checkRecord(bad, rec({ status: 404, error: "no such model", errorShapeOk: true }))).toEqual([]);
  expect(checkRecord(bad, rec({ status: 400, error: "x", errorShapeOk: true }))[0]).toContain("HTTP 400, expected 404");
  expect(checkRecord(bad, rec({ status: 404, error: "x", errorShapeOk: false }))[0]).toContain("OpenAI's shape");
  expect(checkRecord(bad, rec({ status: 200 })).length).toBe(2);
});

test("a cancelled stream passes unless it errored", () => {
  const c = req({ kind: "cancel", cancelAfter: 2 });
  expect(checkRecord(c, rec({ cancelled: true, finishReason: undefined, outputTokens: undefined }))).toEqual([]);
  expect(checkRecord(c, rec({ cancelled: true, status: 503, error: "overloaded" }))).toHaveLength(1);
});

test("the verdict counts the kinds and fails on a missing record, a leak, an unready server, a changed probe", () => {
  const requests = [req(), req({ index: 1, kind: "cancel", cancelAfter: 1 }), req({ index: 2, kind: "invalid", expectStatus: 400, label: "invalid n=129" })];
  const records = [rec(), rec({ index: 1, kind: "cancel", cancelled: true }), rec({ index: 2, kind: "invalid", status: 400, error: "n", errorShapeOk: true })];
  const good = soakVerdict({ requests, records, drained: clean, probe: { before: "a", after: "a" } });
  expect(good.ok).toBe(true);
  expect(good.counts.stream).toEqual({ sent: 1, completed: 1, cancelled: 0, refused: 0, failed: 0 });
  expect(good.counts.cancel.cancelled).toBe(1);
  expect(good.counts.invalid.refused).toBe(1);
  const fails = (v: ReturnType<typeof soakVerdict>) => v.failures.join("\n");
  expect(fails(soakVerdict({ requests, records: records.slice(1), drained: clean }))).toContain("no record");
  expect(fails(soakVerdict({ requests, records, drained: { ...clean, kvBlocksUsed: 3 } }))).toContain("3 KV blocks still held");
  expect(fails(soakVerdict({ requests, records, drained: { ...clean, running: 1, waiting: 2 } }))).toContain("1 sequences running, 2 waiting");
  expect(fails(soakVerdict({ requests, records, drained: { ...clean, ready: false } }))).toContain("/readyz");
  expect(fails(soakVerdict({ requests, records, drained: { ...clean, serverExited: true } }))).toContain("exited");
  expect(fails(soakVerdict({ requests, records, drained: clean, probe: { before: "a", after: "b" } }))).toContain("probe changed");
});
