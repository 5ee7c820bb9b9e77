/**
 * `npm start` (scripts/start.ts) stopped with Ctrl-C while a completion streams: the terminal sends SIGINT to every
 * process of the foreground group, so the test starts start.ts in a process group of its own and signals the group.
 * The stream in flight finishes (its last chunk has a finish reason, then [DONE]): start.ts's children run in
 * sessions of their own, and it stops the gateway first (which lets the stream finish) while the model server keeps
 * serving. Before, the gateway and the model server got the terminal's SIGINT and start.ts's SIGTERM, the gateway
 * closed its connections at once and the model server took the second signal for "stop now". Afterwards neither
 * start.ts nor its two children (their pids from its log) is left. Bounded: 60 s to start, 20 s to stop.
 */
import { expect, test } from "bun:test";
import { spawn } from "node:child_process";
import { join } from "node:path";
import { freePort, waitFor } from "../test/support/ports";

const root = join(import.meta.dir, "..");

/** Whether the process (or, for a negative pid, the process group) exists. */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

const groupAlive = (pgid: number) => alive(-pgid);

test("Ctrl-C on npm start lets the stream in flight finish, then stops every process", async () => {
  const port = freePort();
  const child = spawn(process.execPath, ["scripts/start.ts", "--port", String(port)], {
    cwd: root,
    detached: true, // its own process group, as a terminal's foreground job
    stdio: ["ignore", "pipe", "pipe"],
  });
  const pgid = child.pid!;
  let log = "";
  child.stdout!.on("data", (b: Buffer) => (log += b.toString()));
  child.stderr!.on("data", (b: Buffer) => (log += b.toString()));
  try {
    expect(await waitFor(() => log.includes("[dispatch] ready at"), 60_000, 100)).toBe(true);

    const models = (await (await fetch(`http://127.0.0.1:${port}/v1/models`)).json()) as { data: { id: string }[] };
    const res = await fetch(`http://127.0.0.1:${port}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        model: models.data[0]!.id,
        stream: true,
        max_tokens: 600,
        ignore_eos: true,
        messages: [{ role: "user", content: "Tell me about rivers." }],
      }),
    });
    expect(res.status).toBe(200);
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    let text = "";
    let signalled = false;
    let chunksAfterSignal = 0;
    const deadline = Date.now() + 15_000;
    for (;;) {
      const { value, done } = await reader.read();
      if (done || Date.now() > deadline) break;
      const part = decoder.decode(value, { stream: true });
      text += part;
      if (signalled) chunksAfterSignal += (part.match(/^data: \{/gm) ?? []).length;
      if (!signalled && text.includes('"content"')) {
        signalled = true;
        process.kill(-pgid, "SIGINT"); // Ctrl-C
      }
    }
    const events = text.split("\n").filter((l) => l.startsWith("data: "));
    const last = events.filter((l) => l !== "data: [DONE]").at(-1)!;
    console.error(`[start.test] ${events.length} events, ${chunksAfterSignal} after Ctrl-C; last: ${last.slice(0, 160)}`);
    expect(chunksAfterSignal).toBeGreaterThan(0);
    expect(events.at(-1)).toBe("data: [DONE]");
    expect(JSON.parse(last.slice(6)).choices[0].finish_reason).toBe("length");

    const pids = [...log.matchAll(/\[dispatch\] (?:model server|gateway) pid (\d+)/g)].map((m) => Number(m[1]));
    expect(pids.length).toBe(2);
    await waitFor(() => !groupAlive(pgid) && !pids.some(alive), 20_000, 100);
    expect(groupAlive(pgid)).toBe(false);
    expect(pids.filter(alive)).toEqual([]);
  } finally {
    if (groupAlive(pgid)) process.kill(-pgid, "SIGKILL");
    for (const m of log.matchAll(/\[dispatch\] (?:model server|gateway) pid (\d+)/g)) if (alive(Number(m[1]))) process.kill(Number(m[1]), "SIGKILL");
  }
}, 90_000);
