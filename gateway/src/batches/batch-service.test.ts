import { afterAll, expect, test } from "bun:test";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createBatchService, type Send } from "./batch-service";
import { createFileStore } from "./file-store";

const dir = await mkdtemp(join(tmpdir(), "batch-test-"));
afterAll(() => rm(dir, { recursive: true, force: true }));

const line = (id: string) => JSON.stringify({ custom_id: id, method: "POST", url: "/v1/completions", body: { model: "m", prompt: "x" } });

async function runBatch(send: Send, retryForMs: number) {
  const files = await createFileStore({ dir });
  const svc = createBatchService({ files, send, concurrency: 2, maxRequests: 10, retryForMs });
  const f = await files.put("o", "in.jsonl", "batch", new TextEncoder().encode([line("a"), line("b")].join("\n")));
  const b = await svc.create("o", { input_file_id: f.id, endpoint: "/v1/completions", completion_window: "24h" });
  for (let i = 0; i < 500 && !["completed", "failed"].includes(svc.get(b.id, "o")!.status); i++) await Bun.sleep(5);
  const done = svc.get(b.id, "o")!;
  const text = async (id: string | null) => (id ? new TextDecoder().decode(await files.content(id, "o")) : "");
  return { b: done, out: await text(done.output_file_id), err: await text(done.error_file_id), files };
}

test("a line answered 429 or 503 is tried again (after its retry-after) until it gets an answer", async () => {
  const tries: Record<string, number> = {};
  const send: Send = async (l) => {
    tries[l.customId] = (tries[l.customId] ?? 0) + 1;
    if (tries[l.customId]! <= 2) return { status: l.customId === "a" ? 429 : 503, requestId: null, body: { error: { message: "later" } }, retryAfterS: 0.01 };
    return { status: 200, requestId: "r", body: { ok: l.customId } };
  };
  const { b, out } = await runBatch(send, 5_000);
  expect(b.status).toBe("completed");
  expect(b.request_counts).toEqual({ total: 2, completed: 2, failed: 0 });
  expect(tries).toEqual({ a: 3, b: 3 });
  expect(out.trim().split("\n").map((l) => JSON.parse(l).custom_id).sort()).toEqual(["a", "b"]);
});

test("past retryForMs the last answer is the line's (an error row); a throwing send is an error row too", async () => {
  const send: Send = async (l) => {
    if (l.customId === "a") throw new Error("socket closed");
    return { status: 429, requestId: null, body: { error: { message: "limited" } }, retryAfterS: 0.01 };
  };
  const { b, err } = await runBatch(send, 50);
  expect(b.request_counts).toEqual({ total: 2, completed: 0, failed: 2 });
  const rows = err.trim().split("\n").map((l) => JSON.parse(l)).sort((x, y) => x.custom_id.localeCompare(y.custom_id));
  expect(rows[0]).toMatchObject({ custom_id: "a", response: null, error: { code: "request_failed", message: "socket closed" } });
  expect(rows[1]).toMatchObject({ custom_id: "b", response: { status_code: 429 } });
  expect(b.output_file_id).toBeNull();
});

test("a file store removes the folders of gateways that are gone, and keeps live ones'", async () => {
  const { mkdir, readdir } = await import("node:fs/promises");
  const root = await mkdtemp(join(tmpdir(), "files-"));
  // a pid far above the kernel's limit runs nowhere; our parent's does
  await mkdir(join(root, "gateway-4999999-abcdef123456"));
  await mkdir(join(root, `gateway-${process.ppid}-abcdef123456`));
  await mkdir(join(root, "unrelated"));
  const files = await createFileStore({ dir: root });
  const left = (await readdir(root)).sort();
  expect(left).toContain(`gateway-${process.ppid}-abcdef123456`);
  expect(left).toContain("unrelated");
  expect(left).not.toContain("gateway-4999999-abcdef123456");
  await files.close();
  await rm(root, { recursive: true, force: true });
});
