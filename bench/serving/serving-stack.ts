/**
 * The model server and the gateway in front of it as Bun processes on loopback, their stdout and
 * stderr in files under `out` (a full pipe would stall them), for the GPU machine's serving runs
 * (device-serve.ts, device-soak.ts). Resolves once the gateway lists the model; a server that
 * exits first, or 150 s without it, rejects with the last lines of its log.
 *
 * @example
 *   const s = await startServingStack({ out, serverMain, gatewayMain, serverArgs: ["--model", dir, "--backend", "cuda"] });
 *   await fetch(`${s.base}/v1/completions`, ...);   // through the gateway
 *   await s.stop();
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { freePort } from "../gateway/processes";

export interface StackOptions {
  /** Folder for `<name>.out` and `<name>.log` of each process. */
  out: string;
  /** The model server's entry (a bundle or model-server/src/main.ts) and the gateway's. */
  serverMain: string;
  gatewayMain: string;
  /** The model server's flags beside --port (which the stack picks). */
  serverArgs: string[];
  serverEnv?: Record<string, string>;
  cwd?: string;
  /** Until the gateway lists the model (the CUDA server generates random weights first). */
  readyTimeoutMs?: number;
  log?: (m: string) => void;
}

export interface ServingStack {
  /** The gateway's base URL. */
  readonly base: string;
  /** The model server's base URL (Connect RPC, /metrics, /readyz). */
  readonly msUrl: string;
  readonly model: string;
  /** Seconds from the start until the gateway listed the model. */
  readonly readyS: number;
  /** The model server's process id (for its RSS). */
  readonly serverPid: number;
  readonly gatewayPid: number;
  /** Exit code of the model server, null while it runs. */
  serverExitCode(): number | null;
  /** SIGKILL every process at once (a signal handler's stop). */
  kill(): void;
  /** SIGTERM, up to 5 s to drain, then SIGKILL. */
  stop(): Promise<void>;
}

type Child = ReturnType<typeof Bun.spawn>;

/** The model server's and the gateway's entries: the sources under `root`, or the bundles in `bundle`. */
export function stackEntries(o: { source: boolean; bundle: string; root: string }): { serverMain: string; gatewayMain: string } {
  return o.source
    ? { serverMain: join(o.root, "model-server", "src", "main.ts"), gatewayMain: join(o.root, "gateway", "src", "main.ts") }
    : { serverMain: join(o.bundle, "model-server.js"), gatewayMain: join(o.bundle, "gateway.js") };
}

/**
 * On SIGTERM or SIGINT: `before` (e.g. print what finished), SIGKILL the stack `current()` returns, exit 143. A
 * timeout's SIGTERM must not leave a draining model server holding the GPU for the next stage.
 */
export function killStackOnSignal(current: () => ServingStack | undefined, log: (m: string) => void, before?: () => void): void {
  for (const sig of ["SIGTERM", "SIGINT"] as const) {
    process.on(sig, () => {
      log(`${sig}: stopping the servers`);
      before?.();
      current()?.kill();
      process.exit(143);
    });
  }
}

export async function startServingStack(o: StackOptions): Promise<ServingStack> {
  const cwd = o.cwd ?? process.cwd();
  const log = o.log ?? (() => {});
  const procs: Child[] = [];
  const logTail = (name: string, lines = 12): string => {
    const file = join(o.out, `${name}.log`);
    const text = existsSync(file) ? readFileSync(file, "utf8").trimEnd().split("\n").slice(-lines).join("\n") : "(no log)";
    return `${file}, last lines:\n${text}`;
  };
  const spawn = (name: string, env: Record<string, string>, argv: string[]): Child => {
    const p = Bun.spawn([process.execPath, ...argv], { cwd, env: { ...process.env, ...env }, stdout: Bun.file(join(o.out, `${name}.out`)), stderr: Bun.file(join(o.out, `${name}.log`)) });
    procs.push(p);
    return p;
  };
  const kill = () => {
    for (const p of procs) if (p.exitCode === null) p.kill("SIGKILL");
  };
  const stop = async () => {
    for (const p of procs) if (p.exitCode === null) p.kill("SIGTERM");
    await Promise.race([Promise.all(procs.map((p) => p.exited)), Bun.sleep(5000)]);
    kill();
  };
  try {
    const t0 = performance.now();
    const msPort = await freePort();
    const server = spawn("model-server", o.serverEnv ?? {}, [o.serverMain, ...o.serverArgs, "--port", String(msPort)]);
    // freePort's port can be taken again before the gateway binds it (any socket may get it): a gateway that exits
    // saying so is started again on another, up to three times
    const startGateway = async () => {
      const port = await freePort();
      return { port, p: spawn("gateway", {}, [o.gatewayMain, "--port", String(port), "--backend", `dispatch=http://127.0.0.1:${msPort}`]) };
    };
    let gateway = await startGateway();
    let gatewayStarts = 1;
    let model = "";
    const until = Date.now() + (o.readyTimeoutMs ?? 150_000);
    while (!model) {
      if (server.exitCode !== null) throw new Error(`the model server exited with status ${server.exitCode}: ${logTail("model-server")}`);
      if (gateway.p.exitCode !== null) {
        const tail = logTail("gateway");
        if (gatewayStarts >= 3 || !/in use|EADDRINUSE/i.test(tail)) throw new Error(`the gateway exited with status ${gateway.p.exitCode}: ${tail}`);
        log(`the gateway's port ${gateway.port} was taken; starting it on another`);
        gateway = await startGateway();
        gatewayStarts++;
        continue;
      }
      if (Date.now() > until) throw new Error(`not serving after ${((o.readyTimeoutMs ?? 150_000) / 1000).toFixed(0)} s: ${logTail("model-server")}`);
      try {
        const body = (await (await fetch(`http://127.0.0.1:${gateway.port}/v1/models`)).json()) as { data?: { id: string }[] };
        model = body.data?.[0]?.id ?? "";
      } catch {
        // not up yet
      }
      if (!model) await Bun.sleep(250);
    }
    const readyS = (performance.now() - t0) / 1000;
    log(`serving ${model} after ${readyS.toFixed(1)} s`);
    const gw = gateway.p;
    return { base: `http://127.0.0.1:${gateway.port}`, msUrl: `http://127.0.0.1:${msPort}`, model, readyS, serverPid: server.pid, gatewayPid: gw.pid, serverExitCode: () => server.exitCode, kill, stop };
  } catch (e) {
    await stop();
    throw e;
  }
}
