/** The entry point as a real process: flags, PORT, refusal of bad config, clean stop. */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { createServer } from "node:net";
import { type OpenAIFake, startOpenAIFake } from "./fakes/openai-fake";

const MAIN = new URL("../src/main.ts", import.meta.url).pathname;
let fake: OpenAIFake;
beforeAll(() => {
  fake = startOpenAIFake();
});
afterAll(() => fake.stop());

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer().listen(0, "127.0.0.1", () => {
      const p = (s.address() as { port: number }).port;
      s.close(() => resolve(p));
    });
  });
}

test("a bad value is refused at start with exit status 2 and the key's name", async () => {
  const p = Bun.spawn([process.execPath, MAIN, "--port", "1"], { env: { ...process.env, DISPATCH_ROUTING_POLICY: "random-ish" }, stdout: "pipe", stderr: "pipe" });
  expect(await p.exited).toBe(2);
  const err = await new Response(p.stderr).text();
  expect(err).toContain("config.routing.policy 'random-ish' is not a known policy");
});

test("PORT and DISPATCH_BACKENDS start a working gateway; SIGTERM stops it", async () => {
  const port = await freePort();
  const p = Bun.spawn([process.execPath, MAIN], {
    env: { ...process.env, PORT: String(port), DISPATCH_BACKENDS: `openai=${fake.url}`, DISPATCH_CONFIG: "" },
    stdout: "pipe",
    stderr: "pipe",
  });
  try {
    let ready = 0;
    const until = Date.now() + 10_000;
    while (Date.now() < until) {
      ready = await fetch(`http://127.0.0.1:${port}/readyz`).then((r) => r.status, () => 0);
      if (ready === 200) break;
      await Bun.sleep(50);
    }
    expect(ready).toBe(200);
    const r = await fetch(`http://127.0.0.1:${port}/v1/chat/completions`, {
      method: "POST",
      body: JSON.stringify({ model: "upstream-model", messages: [{ role: "user", content: "hi" }] }),
    });
    expect(((await r.json()) as { choices: { message: { content: string } }[] }).choices[0]!.message.content).toBe("Hello from upstream");
  } finally {
    p.kill("SIGTERM");
  }
  expect(await p.exited).toBe(0);
  const out = await new Response(p.stdout).text();
  expect(out).toContain('"msg":"listening"');
  expect(out).toContain('"msg":"request"');
});

test("a port already in use stops the gateway with status 1 and an error line naming it, no stack trace", async () => {
  const taken = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("taken") });
  try {
    const p = Bun.spawn([process.execPath, MAIN, "--port", String(taken.port), "--backend", `openai=${fake.url}`], {
      env: { ...process.env, DISPATCH_CONFIG: "" },
      stdout: "pipe",
      stderr: "pipe",
    });
    expect(await p.exited).toBe(1);
    const all = (await new Response(p.stdout).text()) + (await new Response(p.stderr).text());
    expect(all).toContain('"msg":"cannot listen"');
    expect(all).toContain(`cannot listen on 127.0.0.1:${taken.port}: the port is in use`);
    expect(all).not.toContain("    at ");
  } finally {
    taken.stop(true);
  }
});
