/**
 * A ModelRunner whose model runs in a worker thread (runner-worker.ts): each
 * forward() is a message to the worker and resolves when its logits come back,
 * so the calling thread's event loop stays free while the step computes (the
 * same end an AsyncWorker per op would serve, without a thread hop per op).
 *
 * The KV cache lives in SharedArrayBuffers allocated here and shared with the
 * worker, so allocateKv/exportKv/importKv stay synchronous as the contract
 * says. Export/import while a forward() that writes the same blocks is in
 * flight is the caller's race to avoid (the engine never does it).
 *
 * @example
 *   const runner = await createWorkerRunner({ dir: "model-server/models/tiny-wordnet-moe" });
 *   runner.allocateKv(256, 16);
 *   const logits = await runner.forward(step);
 *   runner.close();
 */
import type { CpuKv } from "../backend/cpu/cpu-backend";
import { ModelLoadError, type ModelLoadErrorCode } from "../loader/errors";
import type { ModelConfig } from "./config";
import { cpuKvBytesPerBlock, exportCpuKvBlocks, importCpuKvBlocks, modelSpec, sharedCpuKv, unpackStepOutput } from "./cpu-runner-common";
import { allocateCpuKv, type CpuRunnerOptions } from "./cpu-runner";
import type { ModelRunner, StepInput, StepOutput } from "./runner";

export interface WorkerModelRunner extends ModelRunner {
  readonly config: ModelConfig;
  readonly native: boolean;
}

interface Reply {
  id?: number;
  op?: string;
  message?: string;
  ok?: { config?: ModelConfig; native?: boolean; buffer?: ArrayBuffer; lengths?: number[] };
  error?: { name: string; message: string; code?: string };
}

function toError(e: NonNullable<Reply["error"]>): Error {
  if (e.name === "ModelLoadError" && e.code) return new ModelLoadError(e.code as ModelLoadErrorCode, e.message);
  const err = e.name === "RangeError" ? new RangeError(e.message) : new Error(e.message);
  return err;
}

export async function createWorkerRunner(o: CpuRunnerOptions): Promise<WorkerModelRunner> {
  const worker = new Worker(new URL("./runner-worker.ts", import.meta.url).href);
  let nextId = 1;
  let dead: Error | null = null;
  const pending = new Map<number, { resolve: (r: Reply["ok"]) => void; reject: (e: Error) => void }>();
  const failAll = (e: Error) => {
    dead = e;
    for (const p of pending.values()) p.reject(e);
    pending.clear();
  };
  worker.onmessage = (ev: MessageEvent<Reply>) => {
    const r = ev.data;
    if (r.op === "progress") {
      o.onProgress?.(r.message ?? "");
      return;
    }
    const p = r.id !== undefined ? pending.get(r.id) : undefined;
    if (!p) return;
    pending.delete(r.id!);
    if (r.error) p.reject(toError(r.error));
    else p.resolve(r.ok);
  };
  worker.onerror = (ev) => failAll(new Error(`model worker failed: ${ev.message}`));
  const call = (msg: Record<string, unknown>) =>
    new Promise<Reply["ok"]>((resolve, reject) => {
      if (dead) return reject(dead);
      const id = nextId++;
      pending.set(id, { resolve, reject });
      worker.postMessage({ ...msg, id });
    });

  const { onProgress: _drop, ...options } = o;
  let loaded: Reply["ok"];
  try {
    // The bar follows the caller's terminal, not the worker's view of stderr.
    loaded = await call({ op: "load", options: { ...options, progressBar: options.progressBar ?? Boolean(process.stderr.isTTY) } });
  } catch (e) {
    worker.terminate();
    throw e;
  }
  const config = loaded!.config!;
  let kv: CpuKv | null = null;

  return {
    config,
    native: loaded!.native!,
    backend: "cpu",
    spec: modelSpec(config),
    allocateKv(numBlocks, blockSize) {
      kv = allocateCpuKv(config, numBlocks, blockSize);
      worker.postMessage({ op: "attachKv", kv: sharedCpuKv(kv) });
    },
    kvBytesPerBlock: (bs) => cpuKvBytesPerBlock(config, bs),
    async forward(step: StepInput): Promise<StepOutput> {
      if (!kv) throw new Error("allocateKv() must be called before forward()");
      const r = await call({ op: "forward", step });
      return unpackStepOutput({ buffer: r!.buffer!, lengths: r!.lengths! });
    },
    exportKv: (blockIds) => exportCpuKvBlocks(kv, blockIds),
    importKv: (blockIds, data) => importCpuKvBlocks(kv, blockIds, data),
    close() {
      failAll(new Error("runner is closed"));
      kv = null;
      worker.terminate();
    },
  };
}
