/**
 * One request's state inside the engine: its tokens, how much of them the KV
 * cache holds, which blocks it holds, and how it samples and stops. Plain data;
 * the scheduler and the engine loop move it between states.
 */
import { hashBlock } from "@dispatch/common/src/block-hash";
import { createRng, gpuSeed, type Rng } from "./rng";

/** How the next token is chosen (engine form of proto SamplingParams). */
import type { TokenConstraint } from "./json-constraint";

export interface SamplingOptions {
  /** 0: greedy. */
  temperature: number;
  /** (0, 1]; 1 disables. */
  topP: number;
  /** 0 disables. */
  topK: number;
  frequencyPenalty: number;
  presencePenalty: number;
  /** OpenAI's logit_bias: added to these ids' raw logits before penalties; sampled on the host. */
  logitBias?: ReadonlyMap<number, number>;
  /** Seed of the sequence's own PRNG; undefined: random. */
  seed?: bigint;
}

/** When generation ends (engine form of proto StopConditions). */
export interface StopOptions {
  /** Upper bound on generated tokens (already capped by the context limit). */
  maxTokens: number;
  stopTokenIds: number[];
  ignoreEos: boolean;
  minTokens: number;
}

export type FinishReason = "stop" | "length" | "cancelled" | "deadline" | "error";

export type SeqStatus = "waiting" | "running" | "finished";

export interface Sequence {
  readonly id: number;
  readonly requestId: string;
  /** Prompt followed by the generated tokens. */
  tokens: number[];
  readonly promptLen: number;
  /** Positions [0, numComputed) have KV in this sequence's blocks. */
  numComputed: number;
  blockTable: number[];
  /** Chained hashes of the full blocks of `tokens` computed so far (lazy). */
  blockHashes: bigint[];
  /** Leading blocks already registered in the prefix cache (or shared from it). */
  numRegistered: number;
  /** Prompt tokens taken from the prefix cache at first admission (usage). */
  cachedPromptTokens: number;
  status: SeqStatus;
  /** Proposed tokens to verify in the next step (speculative decoding). */
  draft: number[];
  sampling: SamplingOptions;
  stop: StopOptions;
  rng: Rng;
  /** Seed of the GPU sampler's counter-based draw (the request's seed folded to 53 bits; random without one). */
  gpuSeed: number;
  /** Generated-token counts, for frequency and presence penalties. */
  counts: Map<number, number>;
  /** A constraint on its tokens (JSON mode, json-constraint.ts): sampled on the host under its mask; ends it when complete. */
  constraint?: TokenConstraint;
  /** Absolute deadline in ms since the epoch; 0: none. */
  deadlineMs: number;
  arrivalMs: number;
  /** When it first got prefill work (queue time); 0: not yet. */
  firstScheduledMs: number;
  preemptions: number;
  /** Scheduling priority: lower goes first (vLLM's `priority`); 0 by default. */
  priority: number;
  finishReason: FinishReason | null;
}

/** Tokens generated so far. */
export function numGenerated(seq: Sequence): number {
  return seq.tokens.length - seq.promptLen;
}

/** Extend `seq.blockHashes` to cover the first `nBlocks` full blocks of its tokens. */
export function ensureHashes(seq: Sequence, nBlocks: number, blockSize: number, root: bigint): void {
  const scratch = new Uint32Array(blockSize);
  for (let b = seq.blockHashes.length; b < nBlocks; b++) {
    const base = b * blockSize;
    if (base + blockSize > seq.tokens.length) throw new Error(`sequence ${seq.id}: block ${b} is not full`);
    for (let j = 0; j < blockSize; j++) scratch[j] = seq.tokens[base + j]!;
    seq.blockHashes.push(hashBlock(b === 0 ? root : seq.blockHashes[b - 1]!, scratch));
  }
}

export const DEFAULT_SAMPLING: SamplingOptions = { temperature: 0, topP: 1, topK: 0, frequencyPenalty: 0, presencePenalty: 0 };

export interface SequenceInit {
  id: number;
  requestId?: string;
  prompt: readonly number[];
  sampling?: Partial<SamplingOptions>;
  stop?: Partial<StopOptions>;
  deadlineMs?: number;
  nowMs?: number;
  priority?: number;
}

/**
 * A new waiting sequence with its own PRNG.
 *
 * @example
 * const seq = createSequence({ id: 1, prompt: [5, 6, 7], stop: { maxTokens: 16 } });
 */
export function createSequence(init: SequenceInit): Sequence {
  const sampling = { ...DEFAULT_SAMPLING, ...init.sampling };
  return {
    id: init.id,
    requestId: init.requestId ?? `seq-${init.id}`,
    tokens: [...init.prompt],
    promptLen: init.prompt.length,
    numComputed: 0,
    blockTable: [],
    blockHashes: [],
    numRegistered: 0,
    cachedPromptTokens: 0,
    status: "waiting",
    draft: [],
    sampling,
    stop: { maxTokens: 16, stopTokenIds: [], ignoreEos: false, minTokens: 0, ...init.stop },
    rng: createRng(sampling.seed),
    gpuSeed: gpuSeed(sampling.seed),
    counts: new Map(),
    deadlineMs: init.deadlineMs ?? 0,
    arrivalMs: init.nowMs ?? Date.now(),
    firstScheduledMs: 0,
    preemptions: 0,
    priority: init.priority ?? 0,
    finishReason: null,
  };
}
