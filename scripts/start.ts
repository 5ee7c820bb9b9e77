/**
 * `npm start`: one model server (CPU unless --backend says otherwise) with the
 * bundled model, and the gateway in front of it. Both run as child processes;
 * when either exits, the other is stopped and `npm start` exits with its status.
 *
 *   npm start                      # http://127.0.0.1:8080
 *   npm start -- --port 9000       # or PORT=9000 npm start
 *   npm start -- --model DIR       # another Hugging Face model directory
 *   npm start -- --backend cuda    # the CUDA backend (auto: CUDA when a GPU is usable);
 *                                  # the addon comes from `bun scripts/build-native.ts` with nvcc
 *   npm start -- --backend cuda --int8-experts   # routed experts int8 weight-only (model server flag)
 *
 * Other flags are passed to the gateway (see docs/configuration.md).
 */
import { join } from "node:path";
import type { Subprocess } from "bun";

const root = join(import.meta.dir, "..");
const args = process.argv.slice(2);

function takeFlag(name: string): string | undefined {
  const i = args.indexOf(name);
  if (i < 0) return undefined;
  const value = args[i + 1];
  if (value === undefined || value.startsWith("--")) {
    console.error(`[dispatch] ${name} needs a value`);
    process.exit(2);
  }
  args.splice(i, 2);
  return value;
}

/** A flag without a value (removed from the gateway's arguments). */
function takeSwitch(name: string): boolean {
  const i = args.indexOf(name);
  if (i < 0) return false;
  args.splice(i, 1);
  return true;
}

const model = takeFlag("--model") ?? join(root, "model-server", "models", "tiny-wordnet-moe");
const int8Experts = takeSwitch("--int8-experts");
const backend = takeFlag("--backend") ?? "cpu";
if (!["cpu", "cuda", "auto"].includes(backend)) {
  console.error(`[dispatch] --backend must be cpu, cuda or auto, got ${JSON.stringify(backend)}`);
  process.exit(2);
}
const portArg = takeFlag("--port") ?? process.env.PORT ?? "8080";
if (!/^\d+$/.test(portArg) || Number(portArg) > 65535) {
  console.error(`[dispatch] --port must be an integer in 0..65535, got ${JSON.stringify(portArg)}`);
  process.exit(2);
}

const children: Subprocess[] = []; // the model server, then the gateway
let exiting = false;
/**
 * Front to back, one SIGTERM each: the gateway first (it stops accepting and lets the requests in flight finish, up
 * to its server.shutdown_grace_s), while the model server keeps serving them; then the model server (it drains).
 * The children run in sessions of their own (detached), so a Ctrl-C in the terminal reaches this process only and
 * not them as a second signal (each takes a second signal for "stop now"). A second signal here stops what is left
 * at once. Nothing outlives `npm start`: a child still running at the end of its grace is killed.
 */
function shutdown(code: number): never {
  if (exiting) {
    for (const child of children) child.kill("SIGTERM");
    process.exit(code);
  }
  exiting = true;
  const running = (child: Subprocess) => child.exitCode === null && child.signalCode === null;
  const stop = async (child: Subprocess | undefined, graceMs: number) => {
    if (!child || !running(child)) return;
    child.kill("SIGTERM");
    await Promise.race([child.exited, Bun.sleep(graceMs)]);
    if (running(child)) child.kill("SIGKILL");
  };
  void (async () => {
    await stop(children[1], 30_000); // the gateway's default grace (25 s) and a margin
    await stop(children[0], 35_000); // the model server's drain (30 s by default) and a margin
    process.exit(code);
  })();
  // The task above ends the process; this keeps TypeScript's `never`.
  return undefined as never;
}
process.on("SIGINT", () => shutdown(0));
process.on("SIGTERM", () => shutdown(0));
process.on("SIGHUP", () => shutdown(0)); // the terminal closed: the detached children would not hear of it

/** Reads a child's stdout line by line, echoing it, until `match` returns a value. */
async function waitForLine(proc: Subprocess<"ignore", "pipe", "inherit">, match: (line: string) => string | undefined): Promise<string> {
  const decoder = new TextDecoder();
  let buffered = "";
  const reader = proc.stdout.getReader();
  for (;;) {
    const { value, done } = await reader.read();
    if (done) throw new Error("the model server exited before it was ready");
    buffered += decoder.decode(value, { stream: true });
    let nl: number;
    while ((nl = buffered.indexOf("\n")) >= 0) {
      const line = buffered.slice(0, nl);
      buffered = buffered.slice(nl + 1);
      process.stdout.write(`${line}\n`);
      const found = match(line);
      if (found !== undefined) {
        // Keep echoing the rest of its output.
        void (async () => {
          for (;;) {
            const next = await reader.read();
            if (next.done) return;
            process.stdout.write(next.value);
          }
        })();
        return found;
      }
    }
  }
}

function watch(proc: Subprocess, name: string) {
  void proc.exited.then((code) => {
    if (exiting) return;
    console.error(`[dispatch] ${name} exited with status ${code}`);
    shutdown(code === 0 ? 1 : code);
  });
}

console.error(`[dispatch] starting a model server (backend ${backend}) with ${model} ...`);
const serverArgs = ["--model", model, "--port", "0", "--backend", backend, ...(int8Experts ? ["--int8-experts"] : [])];
const server = Bun.spawn([process.execPath, join(root, "model-server/src/main.ts"), ...serverArgs], {
  cwd: root,
  stdout: "pipe",
  stderr: "inherit",
  stdin: "ignore",
  detached: true,
});
children.push(server);
console.error(`[dispatch] model server pid ${server.pid}`);
watch(server, "model server");
let serverUrl: string;
try {
  serverUrl = await waitForLine(server, (line) => /\[model-server\] ready: .* at (http:\/\/\S+)/.exec(line)?.[1]);
} catch (err) {
  console.error(`[dispatch] ${(err as Error).message}`);
  shutdown(1);
  await new Promise<never>(() => {}); // shutdown exits the process; no gateway without a model server
}

const gateway = Bun.spawn([process.execPath, join(root, "gateway/src/main.ts"), "--port", portArg, "--backend", `dispatch=${serverUrl!}`, ...args], {
  cwd: root,
  stdout: "inherit",
  stderr: "inherit",
  stdin: "ignore",
  detached: true,
});
children.push(gateway);
console.error(`[dispatch] gateway pid ${gateway.pid}`);
watch(gateway, "gateway");

// Tell a newcomer what to do once the gateway answers.
const base = `http://127.0.0.1:${portArg}`;
for (let i = 0; i < 200 && !exiting; i++) {
  try {
    const res = await fetch(`${base}/readyz`);
    if (res.ok) {
      const models = (await (await fetch(`${base}/v1/models`)).json()) as { data: { id: string }[] };
      const id = models.data[0]?.id ?? "MODEL";
      console.error(`\n[dispatch] ready at ${base}. Try:\n  curl -N ${base}/v1/chat/completions -H 'content-type: application/json' \\\n    -d '{"model":"${id}","stream":true,"messages":[{"role":"user","content":"What does \\"river\\" mean?"}]}'\n`);
      break;
    }
  } catch {
    // not listening yet
  }
  await Bun.sleep(100);
}
