/**
 * A ModelRunner over N GPUs of one host with expert parallelism (native-cuda/src/model_ep.cu):
 * one model per GPU in this process, each holding a contiguous slice of every MoE layer's routed
 * experts (and every dense weight), attention data parallel. Each step is split by the pure
 * rule of step-plan.ts (sequence -> rank = blockTable[0] mod N, so a sequence's KV stays on one
 * GPU for its life and sequences sharing a prefix share a rank) and run as one collective step
 * (addon.epStepRanks); a rank with no tokens in a step still serves its experts to the others.
 *
 * KV: the engine's block ids are split into N pools (`kvPools`, engine/block-manager.ts: pool(b) =
 * b mod N, every sequence's blocks in one pool), so rank r stores exactly the ids b = r (mod N), at
 * local index floor(b / N): each GPU holds 1/N of the engine's blocks, all of them usable.
 * Low-latency decode steps replay CUDA graphs on every rank (an idle rank's too). A step that fails on one rank can leave the
 * others inside an exchange until the p2p wait kernel traps (20 s); the runner then refuses
 * further steps (the server must restart).
 *
 * @example
 *   const runner = await createCudaEpRunner({ dir, ranks: 2, maxTokensPerRank: 8192 });
 *   runner.allocateKv(4096, 16);
 *   const out = await runner.forwardSampled(step, sampling);
 */
import type { ModelConfig } from "../model/config";
import { createCudaRunner, type CudaModelRunner, type CudaRunnerOptions, type GpuSampling, type SampledRows } from "../model/cuda-runner";
import type { KvExport, ModelRunner, StepInput, StepOutput } from "../model/runner";
import { ModelLoadError } from "../loader/errors";
import { probeCuda, type CudaAddon, type DeviceInfo, type EpRankStep } from "../backend/cuda/native";
import { packDeviceSampling, packStep, splitLogits, splitSampled, type PackedStep } from "../backend/cuda/pack-step";
import { EpError } from "./errors";
import { planStep, type StepPlan } from "./step-plan";

export interface CudaEpRunnerOptions extends Omit<CudaRunnerOptions, "int8Experts"> {
  /** GPUs 0..ranks-1, one rank each (>= 2). */
  ranks: number;
  /** Steps whose largest rank share is at most this many tokens use the low-latency exchange (default 128). */
  lowLatencyMaxTokens?: number;
  /** The most tokens one rank may get in a step (the engine's --max-batch-tokens; default 8192). */
  maxTokensPerRank?: number;
  /** Called once when a rank fails inside a collective step (the group is out of step: the server should stop serving). */
  onFatal?: (message: string) => void;
}

export interface CudaEpRunner extends ModelRunner {
  /** The block manager keeps each sequence's blocks in pool blockId mod kvPools (= ranks): rank r stores pool r. */
  readonly kvPools: number;
  readonly config: ModelConfig;
  readonly native: false;
  readonly device: DeviceInfo;
  readonly ranks: number;
  forwardSampled(step: StepInput, sampling: GpuSampling[]): Promise<SampledRows[]>;
  /** Device memory free now on the GPU with the least. */
  freeDeviceBytes(): number;
  /** KV blocks that fit in `share` of the free memory of every rank's GPU. */
  kvBlocksForShare(share: number, blockSize: number): number;
  /** Tokens each rank ran so far (attention and its own routed rows): how even the split was. */
  tokensPerRank(): number[];
  /** Per rank, the CUDA graphs captured so far (decode batch sizes x row bounds, idle steps). */
  graphsCaptured(): number[];
}

export async function createCudaEpRunner(o: CudaEpRunnerOptions): Promise<CudaEpRunner> {
  const N = o.ranks;
  if (!(Number.isInteger(N) && N >= 2)) throw new ModelLoadError("unsupported_model", `expert parallelism needs at least 2 ranks, got ${N}`);
  const lowLatencyMaxTokens = o.lowLatencyMaxTokens ?? 128;
  const maxTokensPerRank = o.maxTokensPerRank ?? 8192;
  if (!(Number.isInteger(lowLatencyMaxTokens) && lowLatencyMaxTokens >= 1 && lowLatencyMaxTokens <= maxTokensPerRank)) {
    throw new ModelLoadError("unsupported_model", `low-latency EP steps need 1 <= ${lowLatencyMaxTokens} <= ${maxTokensPerRank} tokens per rank`);
  }
  const probe = probeCuda();
  if (!probe.ok) throw new ModelLoadError("unsupported_model", `CUDA backend unavailable: ${probe.reason}`);
  if (N > probe.device.count) throw new ModelLoadError("unsupported_model", `--ep ${N} needs ${N} GPUs; this host has ${probe.device.count}`);
  const addon = probe.addon;
  const env = process.env.DISPATCH_CUDA_GRAPH_MAX_BATCH;
  const graphs = o.graphMaxBatch ?? (env !== undefined ? Number(env) : 256);
  if (!Number.isInteger(graphs) || graphs < 0) throw new ModelLoadError("unsupported_model", `graph max batch must be a non-negative integer, got ${graphs}`);
  const ranks: CudaModelRunner[] = [];
  try {
    for (let r = 0; r < N; r++) {
      addon.setDevice(r);
      ranks.push(await createCudaRunner({ ...o, graphMaxBatch: 0, int8Experts: false, onProgress: (m) => o.onProgress?.(`rank ${r}: ${m}`) }));
    }
    addon.setDevice(0);
    o.onProgress?.(`expert parallelism over ${N} GPUs: keeping each rank's experts, mapping peer buffers`);
    addon.epEnable(
      ranks.map((r) => r.handle),
      { maxTokensLl: lowLatencyMaxTokens, maxTokensHt: maxTokensPerRank },
    );
    // low-latency decode steps (and idle ranks' steps) replay CUDA graphs; the addon caps the
    // batch at the low-latency share (DISPATCH_CUDA_EP_GRAPHS=0 turns them off)
    for (const r of ranks) addon.setGraphs(r.handle, graphs);
  } catch (e) {
    ranks.forEach((r, i) => {
      addon.setDevice(i);
      r.close();
    });
    addon.setDevice(0);
    throw e;
  }
  return wrap(addon, ranks, { lowLatencyMaxTokens, maxTokensPerRank }, o.onFatal);
}

function wrap(addon: CudaAddon, ranks: CudaModelRunner[], lim: { lowLatencyMaxTokens: number; maxTokensPerRank: number }, onFatal?: (message: string) => void): CudaEpRunner {
  const N = ranks.length;
  const config = ranks[0]!.config;
  const handles = ranks.map((r) => r.handle);
  const tokens = new Array<number>(N).fill(0);
  /** numBlocks: the engine's (all pools); localBlocks: what each rank stores (ceil(numBlocks / N)). */
  let kv: { numBlocks: number; localBlocks: number; blockSize: number; stride: number } | null = null;
  let broken: Error | null = null;
  let closed = false;
  const live = () => {
    if (closed) throw new Error("runner is closed");
    if (broken) throw new EpError("rank_failed", `an earlier EP step failed (${broken.message}); restart the model server`);
  };
  /** Runs f with GPU r current (the addon's free-memory and KV calls act on the current GPU). */
  const onDevice = <T>(r: number, f: () => T): T => {
    addon.setDevice(r);
    try {
      return f();
    } finally {
      addon.setDevice(0);
    }
  };
  const rankOfBlocks = (blockIds: Int32Array) => {
    if (blockIds.length === 0) throw new RangeError("no blocks given");
    return ((blockIds[0]! % N) + N) % N;
  };
  /** Rank r's local ids of engine block ids that must all be in pool r (the block manager's rule). */
  const localIds = (blockIds: Int32Array, r: number) =>
    blockIds.map((b) => {
      if (b < 0 || b % N !== r) throw new RangeError(`block ${b} is not in KV pool ${r} of ${N} (a sequence's blocks must share one pool; is the engine's block manager created with kvPools?)`);
      return Math.floor(b / N);
    });

  /** Splits the step by rank and packs each share; a share without tokens is an idle rank (T = 0). */
  const split = (step: StepInput): { plan: StepPlan; packed: (PackedStep | null)[] } => {
    if (!kv) throw new Error("allocateKv() must be called before forward()");
    const k = kv;
    const plan = planStep(step, N, { lowLatencyMaxTokens: lim.lowLatencyMaxTokens });
    const packed = plan.ranks.map((r, rank) => {
      const seqs = r.seqs.map((q) => ({ ...q, blockTable: localIds(q.blockTable, rank) }));
      const p = packStep({ seqs }, { blockSize: k.blockSize, numBlocks: k.localBlocks, stride: k.stride, vocabSize: config.vocabSize, maxContext: config.maxContext });
      if (p.T > lim.maxTokensPerRank) throw new RangeError(`${p.T} tokens for one EP rank in a step; the most is ${lim.maxTokensPerRank} (--max-batch-tokens)`);
      return p.T > 0 ? p : null;
    });
    return { plan, packed };
  };
  const idle: EpRankStep = { meta: new Int32Array(0), T: 0, S: 0, R: 0 };
  const run = async (steps: EpRankStep[]) => {
    // a synchronous throw is the addon refusing the input before any rank started: nothing to undo
    const pending = addon.epStepRanks(handles, steps);
    try {
      const out = await pending;
      steps.forEach((s, r) => (tokens[r]! += s.T));
      return out.ranks;
    } catch (e) {
      // a rank failed inside the collective step: its peers may be left in an exchange
      broken = e instanceof Error ? e : new Error(String(e));
      onFatal?.(`expert-parallel step failed, the GPU group is out of step: ${broken.message}`);
      throw broken;
    }
  };

  return {
    config,
    device: ranks[0]!.device,
    backend: "cuda",
    native: false,
    ranks: N,
    spec: ranks[0]!.spec,
    tokensPerRank: () => [...tokens],
    graphsCaptured: () => ranks.map((r) => r.graphsCaptured()),
    freeDeviceBytes: () => Math.min(...ranks.map((r, i) => onDevice(i, () => r.freeDeviceBytes()))),
    kvPools: N,
    // each rank stores 1/N of the engine's blocks
    kvBlocksForShare: (share, blockSize) => N * Math.min(...ranks.map((r, i) => onDevice(i, () => r.kvBlocksForShare(share, blockSize)))),
    kvBytesPerBlock: (blockSize) => ranks[0]!.kvBytesPerBlock(blockSize),
    allocateKv(numBlocks, blockSize) {
      live();
      if (numBlocks <= 0 || blockSize <= 0) throw new RangeError(`allocateKv(${numBlocks}, ${blockSize}): both must be positive`);
      kv = null;
      const localBlocks = Math.ceil(numBlocks / N);
      let stride = 0;
      ranks.forEach((_, i) => (stride = onDevice(i, () => addon.allocateKv(handles[i]!, localBlocks, blockSize))));
      kv = { numBlocks, localBlocks, blockSize, stride };
    },
    async forward(step: StepInput): Promise<StepOutput> {
      live();
      const { plan, packed } = split(step);
      const out: StepOutput = step.seqs.map(() => new Float32Array(0));
      if (packed.every((p) => p === null)) return out;
      const res = await run(packed.map((p) => (p ? { meta: p.meta, T: p.T, S: p.S, R: p.R } : idle)));
      packed.forEach((p, r) => {
        if (!p) return;
        const per = splitLogits(res[r]!.logits!, p.logitCounts, config.vocabSize);
        plan.ranks[r]!.seqIndex.forEach((i, j) => (out[i] = per[j]!));
      });
      return out;
    },
    async forwardSampled(step, sampling) {
      live();
      if (sampling.length !== step.seqs.length) throw new RangeError(`${sampling.length} sampling entries for ${step.seqs.length} sequences`);
      const { plan, packed } = split(step);
      const out: SampledRows[] = step.seqs.map(() => ({ ids: new Int32Array(0), logprobs: new Float32Array(0) }));
      if (packed.every((p) => p === null)) return out;
      const steps = packed.map((p, r): EpRankStep => {
        if (!p) return idle;
        const mine = plan.ranks[r]!.seqIndex.map((i) => sampling[i]!);
        const { params, hostRows } = packDeviceSampling(mine, p.logitCounts, p.R, config.vocabSize);
        return { meta: p.meta, T: p.T, S: p.S, R: p.R, params, ...(hostRows.length > 0 ? { hostRows } : {}) };
      });
      const res = await run(steps);
      packed.forEach((p, r) => {
        if (!p) return;
        const o = res[r]!;
        const mine = plan.ranks[r]!.seqIndex.map((i) => sampling[i]!);
        const rows = splitSampled({ ids: o.ids!, logprobs: o.logprobs!, hostLogits: o.hostLogits }, mine, p.logitCounts, config.vocabSize);
        plan.ranks[r]!.seqIndex.forEach((i, j) => (out[i] = rows[j]!));
      });
      return out;
    },
    exportKv(blockIds): KvExport {
      live();
      const r = rankOfBlocks(blockIds);
      return onDevice(r, () => ranks[r]!.exportKv(localIds(blockIds, r)));
    },
    importKv(blockIds, data) {
      live();
      const r = rankOfBlocks(blockIds);
      onDevice(r, () => ranks[r]!.importKv(localIds(blockIds, r), data));
    },
    close() {
      if (closed) return;
      closed = true;
      kv = null;
      try {
        addon.epRelease(handles);
      } finally {
        ranks.forEach((r, i) => onDevice(i, () => r.close()));
      }
    },
  };
}
