/**
 * Worker-thread side of the worker runner (worker-runner.ts): holds the CPU
 * runner and runs each step synchronously, so the engine's thread (RPC,
 * streaming, scheduling) never waits on model compute. Messages, in order:
 *   {op:"load", id, options}          -> {id, ok:{config, native}}
 *   {op:"attachKv", kv}               (shared storage; errors come back on the next forward)
 *   {op:"forward", id, step}          -> {id, ok:{buffer, lengths}} (logits packed, buffer transferred)
 * Any failure -> {id, error:{name, message, code?}}.
 */
import { cpuKvFromShared, packStepOutput, type SharedCpuKv } from "./cpu-runner-common";
import { createCpuRunner, type CpuModelRunner, type CpuRunnerOptions } from "./cpu-runner";

declare const self: Worker;

let runner: CpuModelRunner | null = null;
let pendingError: Error | null = null;

const fail = (id: number | undefined, e: unknown) => {
  const err = e instanceof Error ? e : new Error(String(e));
  self.postMessage({ id, error: { name: err.name, message: err.message, code: (err as { code?: string }).code } });
};

self.onmessage = async (ev: MessageEvent) => {
  const m = ev.data as { op: string; id?: number; options?: CpuRunnerOptions; kv?: SharedCpuKv; step?: never };
  try {
    switch (m.op) {
      case "load": {
        runner = await createCpuRunner({ ...m.options!, onProgress: (message) => self.postMessage({ op: "progress", message }) });
        self.postMessage({ id: m.id, ok: { config: runner.config, native: runner.native } });
        return;
      }
      case "attachKv": {
        const kv = m.kv!;
        try {
          runner!.attachKv(cpuKvFromShared(kv));
        } catch (e) {
          pendingError = e instanceof Error ? e : new Error(String(e));
        }
        return;
      }
      case "forward": {
        if (pendingError) {
          const e = pendingError;
          pendingError = null;
          throw e;
        }
        const packed = packStepOutput(runner!.forwardSync(m.step!));
        self.postMessage({ id: m.id, ok: packed }, [packed.buffer]);
        return;
      }
      case "close":
        runner?.close();
        runner = null;
        return;
      default:
        throw new Error(`unknown op ${m.op}`);
    }
  } catch (e) {
    fail(m.id, e);
  }
};
