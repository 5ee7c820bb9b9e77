/**
 * Stopping the gateway (what SIGTERM / SIGINT do): it stops accepting connections at once, requests in flight (a
 * stream here) finish within `server.shutdown_grace_s` with the backend still reachable, and what is still running at
 * the end of the grace is closed. Before, stop() closed every connection at once and cut the streams in flight.
 */
import { expect, test } from "bun:test";
import { startConnectFake } from "./fakes/connect-fake";
import { startGateway } from "./start-gateway";

const messages = [{ role: "user" as const, content: "hi" }];

async function setup(graceS: number) {
  const fake = await startConnectFake({ serverId: "x" });
  fake.reply = "one two three four five six seven eight nine ten eleven twelve";
  fake.tokenDelayMs = 40; // ~0.5 s of stream
  const t = await startGateway({ backends: [{ kind: "dispatch", url: fake.url, id: "x" }], server: { shutdown_grace_s: graceS }, logging: { requests: false } });
  return { fake, t };
}

test("a stream in flight finishes within the shutdown grace; new connections are refused meanwhile", async () => {
  const { fake, t } = await setup(10);
  try {
    const stream = await t.client.chat.completions.create({ model: "fake-moe", messages, stream: true });
    let text = "";
    let finish: string | null = null;
    let stopping: Promise<void> | null = null;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta?.content ?? "";
      finish = chunk.choices[0]?.finish_reason ?? finish;
      if (!stopping && text.length > 0) {
        stopping = t.gw.stop();
        await Bun.sleep(20);
        const refused = await fetch(`${t.url}/v1/models`).then(() => false, () => true);
        expect(refused).toBe(true);
      }
    }
    // the whole reply arrived (stop() closing connections at once cuts it after the first words)
    expect(text).toBe(fake.reply);
    expect(finish).toBe("stop");
    const t0 = performance.now();
    await stopping;
    expect(performance.now() - t0).toBeLessThan(2000);
  } finally {
    fake.stop();
  }
});

test("with no grace, stop() closes the stream in flight at once", async () => {
  const { fake, t } = await setup(0);
  try {
    const stream = await t.client.chat.completions.create({ model: "fake-moe", messages, stream: true });
    let text = "";
    let stopping: Promise<void> | null = null;
    const read = (async () => {
      for await (const chunk of stream) {
        text += chunk.choices[0]?.delta?.content ?? "";
        if (!stopping && text.length > 0) stopping = t.gw.stop();
      }
    })();
    await read.catch(() => {});
    await stopping;
    expect(text.length).toBeGreaterThan(0);
    expect(text.length).toBeLessThan(fake.reply.length);
  } finally {
    fake.stop();
  }
});
