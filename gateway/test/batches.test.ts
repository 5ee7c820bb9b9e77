/**
 * OpenAI's Files and Batch APIs through the gateway, with the official openai client: an uploaded JSONL of requests
 * runs through the gateway's own routes (a fake model server answers), its output and error files hold each line's
 * answer by custom_id, a file that does not validate fails the batch with its lines named, a cancelled batch keeps
 * what finished, Responses requests in a batch are stored as the batch's creator's, and another API key sees none of
 * a caller's files or batches.
 */
import { afterAll, afterEach, beforeAll, describe, expect, test } from "bun:test";
import OpenAI, { toFile } from "openai";
import { type ConnectFake, startConnectFake } from "./fakes/connect-fake";
import { CHATML } from "./fakes/test-model";
import { startGateway, type TestGateway } from "./start-gateway";

let fake: ConnectFake;
let t: TestGateway;
let other: OpenAI;

beforeAll(async () => {
  fake = await startConnectFake({ modelId: "tiny-moe", chatTemplate: CHATML });
  t = await startGateway({ auth: { api_keys: ["key-a", "key-b"] }, batches: { concurrency: 2, priority: 5 }, backends: [{ kind: "dispatch", url: fake.url }] }, "key-a");
  other = new OpenAI({ baseURL: `${t.url}/v1`, apiKey: "key-b", maxRetries: 0 });
});
afterAll(async () => {
  await t.stop();
  fake.stop();
});
afterEach(() => {
  fake.tokenDelayMs = 0;
});

const chatLine = (id: string, content: string, extra: Record<string, unknown> = {}) =>
  JSON.stringify({ custom_id: id, method: "POST", url: "/v1/chat/completions", body: { model: "tiny-moe", messages: [{ role: "user", content }], max_tokens: 64, ...extra } });

async function upload(lines: string[], client = t.client) {
  return client.files.create({ file: await toFile(new TextEncoder().encode(lines.join("\n")), "input.jsonl"), purpose: "batch" });
}

async function settle(id: string, client = t.client, ms = 10_000) {
  const end = Date.now() + ms;
  for (;;) {
    const b = await client.batches.retrieve(id);
    if (["completed", "failed", "cancelled", "expired"].includes(b.status)) return b;
    if (Date.now() > end) throw new Error(`batch ${id} still ${b.status}`);
    await Bun.sleep(20);
  }
}

const rows = async (fileId: string | null | undefined) =>
  fileId ? (await (await t.client.files.content(fileId)).text()).trim().split("\n").map((l) => JSON.parse(l) as { custom_id: string; response: { status_code: number; body: any } | null }) : [];

test("a batch runs every line through the gateway: output by custom_id, errors apart, counts", async () => {
  const file = await upload([chatLine("a", "one"), chatLine("b", "two", { temperature: 5 }), chatLine("c", "three")]);
  expect(file).toMatchObject({ object: "file", purpose: "batch", filename: "input.jsonl" });
  const created = await t.client.batches.create({ input_file_id: file.id, endpoint: "/v1/chat/completions", completion_window: "24h", metadata: { job: "nightly" } });
  expect(created).toMatchObject({ object: "batch", status: "validating", metadata: { job: "nightly" } });
  const b = await settle(created.id);
  expect(b.status).toBe("completed");
  expect(b.request_counts).toEqual({ total: 3, completed: 2, failed: 1 });
  const out = await rows(b.output_file_id);
  // in the order they finished: lines match by custom_id
  expect(out.map((r) => r.custom_id).sort()).toEqual(["a", "c"]);
  for (const r of out) expect(r.response!).toMatchObject({ status_code: 200, body: { object: "chat.completion", choices: [{ message: { content: "Hello, world!" } }] } });
  const outFile = await t.client.files.retrieve(b.output_file_id!);
  expect(outFile).toMatchObject({ purpose: "batch_output", filename: `${b.id}_output.jsonl` });
  expect(outFile.bytes).toBe((await (await t.client.files.content(b.output_file_id!)).arrayBuffer()).byteLength);
  const errs = await rows(b.error_file_id);
  expect(errs).toHaveLength(1);
  expect(errs[0]!).toMatchObject({ custom_id: "b", response: { status_code: 400, body: { error: { param: "temperature" } } } });
  // batches.priority was set on lines without one
  expect(fake.requests.at(-1)!.priority).toBe(5);
  expect((await t.client.batches.list()).data.map((x) => x.id)).toContain(b.id);
  const metrics = await (await fetch(`${t.url}/metrics`)).text();
  expect(metrics).toMatch(/dispatch_gateway_batches\{status="completed"\} [1-9]/);
  expect(metrics).toMatch(/dispatch_gateway_batch_requests_total\{outcome="failed"\} [1-9]/);
});

test("an input that does not validate fails the batch, its lines named; nothing runs", async () => {
  const before = fake.requests.length;
  const file = await upload([chatLine("a", "ok"), "{not json", JSON.stringify({ custom_id: "a", method: "POST", url: "/v1/chat/completions", body: {} }), JSON.stringify({ custom_id: "c", method: "POST", url: "/v1/completions", body: {} })]);
  const b = await settle((await t.client.batches.create({ input_file_id: file.id, endpoint: "/v1/chat/completions", completion_window: "24h" })).id);
  expect(b.status).toBe("failed");
  expect(b.errors!.data!.map((e) => [e.line, e.code])).toEqual([
    [2, "invalid_json"],
    [3, "duplicate_custom_id"],
    [4, "mismatched_url"],
  ]);
  expect(fake.requests.length).toBe(before);
});

test("cancel: the batch stops, what finished is in its output", async () => {
  fake.tokenDelayMs = 20;
  const file = await upload(Array.from({ length: 12 }, (_, i) => chatLine(`r${i}`, `line ${i}`)));
  const created = await t.client.batches.create({ input_file_id: file.id, endpoint: "/v1/chat/completions", completion_window: "24h" });
  const end = Date.now() + 10_000;
  while ((await t.client.batches.retrieve(created.id)).request_counts!.completed < 2 && Date.now() < end) await Bun.sleep(20);
  expect((await t.client.batches.cancel(created.id)).status).toBe("cancelling");
  const b = await settle(created.id);
  expect(b.status).toBe("cancelled");
  expect(b.request_counts!.completed).toBeGreaterThanOrEqual(2);
  expect(b.request_counts!.completed).toBeLessThan(12);
  expect((await rows(b.output_file_id)).length).toBe(b.request_counts!.completed);
});

test("Responses requests in a batch are stored as the creator's", async () => {
  const line = JSON.stringify({ custom_id: "r", method: "POST", url: "/v1/responses", body: { model: "tiny-moe", input: "hi" } });
  const file = await upload([line]);
  const b = await settle((await t.client.batches.create({ input_file_id: file.id, endpoint: "/v1/responses", completion_window: "24h" })).id);
  const [row] = await rows(b.output_file_id);
  const id = row!.response!.body.id as string;
  expect((await t.client.responses.retrieve(id)).output_text).toBe("Hello, world!");
  expect(await other.responses.retrieve(id).catch((e) => e)).toBeInstanceOf(OpenAI.NotFoundError);
});

describe("files and ownership", () => {
  test("list, retrieve, delete; another key sees none of it", async () => {
    const f = await upload([chatLine("x", "y")]);
    expect((await t.client.files.retrieve(f.id)).bytes).toBe(f.bytes);
    expect((await t.client.files.list()).data.map((x) => x.id)).toContain(f.id);
    expect(await other.files.retrieve(f.id).catch((e) => e)).toBeInstanceOf(OpenAI.NotFoundError);
    expect((await other.files.list()).data).toEqual([]);
    expect(await other.batches.create({ input_file_id: f.id, endpoint: "/v1/chat/completions", completion_window: "24h" }).catch((e) => e)).toBeInstanceOf(OpenAI.NotFoundError);
    const b = await t.client.batches.create({ input_file_id: f.id, endpoint: "/v1/chat/completions", completion_window: "24h" });
    expect(await other.batches.retrieve(b.id).catch((e) => e)).toBeInstanceOf(OpenAI.NotFoundError);
    await settle(b.id);
    expect(await t.client.files.delete(f.id)).toMatchObject({ id: f.id, deleted: true });
    expect(await t.client.files.retrieve(f.id).catch((e) => e)).toBeInstanceOf(OpenAI.NotFoundError);
  });

  test("refusals: another purpose, no file, a bad endpoint or window", async () => {
    const bad = await t.client.files.create({ file: await toFile(new TextEncoder().encode("x"), "a.txt"), purpose: "assistants" }).catch((e) => e);
    expect(bad).toBeInstanceOf(OpenAI.BadRequestError);
    const f = await upload([chatLine("x", "y")]);
    for (const body of [
      { input_file_id: f.id, endpoint: "/v1/images", completion_window: "24h" },
      { input_file_id: f.id, endpoint: "/v1/chat/completions", completion_window: "1h" },
    ]) {
      expect(await t.client.batches.create(body as never).catch((e) => e)).toBeInstanceOf(OpenAI.BadRequestError);
    }
  });
});
