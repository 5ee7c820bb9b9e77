/**
 * A ModelRunner whose routed experts are spread over N loopback ranks (worker
 * threads, rank-worker.ts) on the CPU backend. This thread plays rank 0's
 * scheduler: for each step it makes the plan (step-plan.ts), hands the same
 * encoded plan to every rank, and puts their logits back in the step's order.
 * The ranks exchange tokens among themselves (shared-memory transport) in each
 * MoE layer; attention runs on the rank that owns the sequence.
 *
 * The KV storage is one set of SharedArrayBuffers shared by every rank (each
 * sequence writes only its own blocks), so exportKv/importKv stay synchronous
 * here; on GPUs each rank holds its own sequences' KV instead.
 * A step that fails on one rank leaves the group's collectives out of step: the
 * runner then refuses further steps (create a new one).
 *
 * @example
 *   const runner = await createEpCpuRunner({ dir, ranks: 2 });              // experts split evenly
 *   const r2 = await createEpCpuRunner({ dir, ranks: 2, placement: [[0, 1, 2], [3, 4, 5, 6, 7]] });
 *   runner.allocateKv(64, 4);
 *   const logits = await runner.forward(step);
 *   runner.close();
 */
import type { CpuKv } from "../backend/cpu/cpu-backend";
import { allocateCpuKv, readModelConfig } from "../model/cpu-runner";
import { cpuKvBytesPerBlock, exportCpuKvBlocks, importCpuKvBlocks, modelSpec, sharedCpuKv, unpackStepOutput } from "../model/cpu-runner-common";
import type { ModelConfig } from "../model/config";
import type { ModelRunner, StepInput, StepOutput } from "../model/runner";
import { EpError, type EpErrorCode } from "./errors";
import { createLoopbackShared } from "./loopback-transport";
import { createContiguousPlacement } from "./placement";
import type { RankInit } from "./rank-worker";
import type { EpStats } from "./cpu-expert-parallel";
import { encodeStepPlan, planStep } from "./step-plan";

export interface EpCpuRunnerOptions {
  dir: string;
  modelId?: string;
  ranks: number;
  /** Each rank's global expert ids; default: contiguous, as even as possible. */
  placement?: number[][];
  native?: boolean;
  /** Steps whose largest rank share is at most this run in low-latency mode (default 128, DeepEP's usual decode batch). */
  lowLatencyMaxTokens?: number;
  /** Largest step (tokens) the transport's mailboxes are sized for (default 4096). */
  maxTokensPerStep?: number;
  align?: number;
  timeoutMs?: number;
}

export interface EpCpuRunner extends ModelRunner {
  readonly config: ModelConfig;
  readonly ranks: number;
  /** Per rank, dispatch calls per mode and expert rows computed so far. */
  readonly stats: EpStats[];
}

interface Reply {
  id?: number;
  ok?: { config?: ModelConfig; native?: boolean; buffer?: ArrayBuffer; lengths?: number[]; stats?: EpStats };
  error?: { name: string; message: string; code?: string };
}

export async function createEpCpuRunner(o: EpCpuRunnerOptions): Promise<EpCpuRunner> {
  const N = o.ranks;
  if (!(Number.isInteger(N) && N >= 1)) throw new EpError("bad_placement", `ranks must be a positive integer, got ${N}`);
  const config = readModelConfig(o.dir, o.modelId);
  const moe = config.layers.find((l) => l.kind === "moe");
  const E = moe?.kind === "moe" ? moe.numExperts : 0;
  const k = moe?.kind === "moe" ? moe.topK : 1;
  const placement = o.placement ?? Array.from({ length: N }, (_, r) => [...createContiguousPlacement(E, N).localExperts(r)]);
  if (placement.length !== N) throw new EpError("bad_placement", `placement lists ${placement.length} ranks for a group of ${N}`);
  const lowLatencyMaxTokens = o.lowLatencyMaxTokens ?? 128;
  const maxTokens = o.maxTokensPerStep ?? 4096;
  // Largest message: high-throughput dispatch of a whole step to one rank (rows, slots, weights).
  const shared = createLoopbackShared(N, 8 + maxTokens * (4 * k + 4 * (config.hidden + k)));

  const workers: Worker[] = [];
  const pending = new Map<number, { resolve: (r: Reply["ok"]) => void; reject: (e: Error) => void }>();
  let nextId = 1;
  let dead: Error | null = null;
  const failAll = (e: Error) => {
    dead = e;
    for (const p of pending.values()) p.reject(e);
    pending.clear();
  };
  const call = (w: Worker, msg: Record<string, unknown>) =>
    new Promise<Reply["ok"]>((resolve, reject) => {
      if (dead) return reject(dead);
      const id = nextId++;
      pending.set(id, { resolve, reject });
      w.postMessage({ ...msg, id });
    });
  for (let r = 0; r < N; r++) {
    const w = new Worker(new URL("./rank-worker.ts", import.meta.url).href);
    w.onmessage = (ev: MessageEvent<Reply>) => {
      const m = ev.data;
      const p = m.id !== undefined ? pending.get(m.id) : undefined;
      if (!p) return;
      pending.delete(m.id!);
      if (m.error) p.reject(m.error.name === "EpError" ? new EpError((m.error.code ?? "transport") as EpErrorCode, m.error.message) : new Error(m.error.message));
      else p.resolve(m.ok);
    };
    w.onerror = (ev) => failAll(new Error(`rank ${r} worker failed: ${ev.message}`));
    workers.push(w);
  }
  const close = () => {
    failAll(new Error("runner is closed"));
    for (const w of workers) w.terminate();
  };
  let native = false;
  try {
    const loaded = await Promise.all(
      workers.map((w, rank) => {
        const init: RankInit = { dir: o.dir, modelId: o.modelId, native: o.native, rank, placement, shared, align: o.align, timeoutMs: o.timeoutMs };
        return call(w, { op: "load", init });
      }),
    );
    native = loaded[0]!.native!;
  } catch (e) {
    close();
    throw e;
  }
  let kv: CpuKv | null = null;
  const stats: EpStats[] = workers.map(() => ({ htCalls: 0, llCalls: 0, rowsComputed: 0 }));

  return {
    config,
    ranks: N,
    stats,
    backend: "cpu",
    spec: modelSpec(config),
    allocateKv(numBlocks, blockSize) {
      kv = allocateCpuKv(config, numBlocks, blockSize);
      for (const w of workers) w.postMessage({ op: "attachKv", kv: sharedCpuKv(kv) });
    },
    kvBytesPerBlock: (bs) => cpuKvBytesPerBlock(config, bs),
    async forward(step: StepInput): Promise<StepOutput> {
      if (!kv) throw new Error("allocateKv() must be called before forward()");
      if (dead) throw dead;
      const total = step.seqs.reduce((n, s) => n + s.tokens.length, 0);
      if (total > maxTokens) throw new EpError("capacity", `step of ${total} tokens exceeds maxTokensPerStep ${maxTokens}`);
      const plan = planStep(step, N, { lowLatencyMaxTokens });
      const encoded = encodeStepPlan(plan);
      // Every rank answers (a failing rank aborts the transport, so its peers stop waiting);
      // report the root cause: a rank's own error rather than the aborts it caused in its peers.
      const settled = await Promise.allSettled(workers.map((w) => call(w, { op: "step", plan: encoded })));
      const errors = settled.flatMap((r) => (r.status === "rejected" ? [r.reason as Error] : []));
      if (errors.length > 0) {
        const root = errors.find((e) => !(e instanceof EpError && e.code === "transport")) ?? errors[0]!;
        failAll(root); // the group's collectives are out of step: it cannot be trusted again
        throw root;
      }
      const replies = settled.map((r) => (r as PromiseFulfilledResult<Reply["ok"]>).value);
      const out: StepOutput = new Array(step.seqs.length);
      replies.forEach((rep, r) => {
        Object.assign(stats[r]!, rep!.stats);
        unpackStepOutput({ buffer: rep!.buffer!, lengths: rep!.lengths! }).forEach((rows, i) => {
          out[plan.ranks[r]!.seqIndex[i]!] = rows;
        });
      });
      return out;
    },
    exportKv: (blockIds) => exportCpuKvBlocks(kv, blockIds),
    importKv: (blockIds, data) => importCpuKvBlocks(kv, blockIds, data),
    close,
  };
}
