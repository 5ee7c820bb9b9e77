/**
 * The engine's public shape: its options, the per-step statistics it reports and the Engine interface
 * (engine.ts builds it; callers import these from there).
 */
import type { KvExport, ModelRunner, ModelSpec } from "../model/runner";
import type { TokenBytes } from "./detokenizer";
import type { KvFeed } from "./kv-feed";
import type { LoadSnapshot } from "./load-tracker";
import type { GenerateParams, GenerateStream } from "./request";

export interface EngineOptions {
  runner: ModelRunner;
  blockSize: number;
  numKvBlocks: number;
  maxNumSeqs: number;
  maxBatchTokens: number;
  /** Most requests queued beyond the batch's free slots; beyond it `generate` fails with resource_exhausted. */
  maxQueue: number;
  serverId: string;
  /** Token id -> bytes, for text deltas. Without it `returnText` and JSON mode are refused. */
  tokenBytes?: TokenBytes;
  /** The tokenizer's special tokens (never part of JSON mode's output; EOS ids are excluded anyway). */
  specialTokenIds?: readonly number[];
  /** Tokens proposed per step by prompt lookup (speculative decoding); 0: off. */
  specTokens?: number;
  /**
   * Launch each step of a steady decode batch before the previous one returns, where the runner chains sampled
   * steps (lookahead.ts; default true). false: one step at a time.
   */
  lookahead?: boolean;
  /** Cap on prompt + output tokens below the model's own context. */
  maxContext?: number;
  /** Called after every model step (metrics). */
  onStep?: (s: StepStats) => void;
  /** JSON mode: the seconds each vocabulary mask not found in the cache took, on the engine's thread (metrics). */
  onJsonMask?: (seconds: number) => void;
  /**
   * A model step that has not returned this many ms after the engine began waiting on it means a stuck device (a
   * kernel that never ends cannot be cancelled): every live sequence finishes with "error", the engine refuses new
   * work (unavailable) and `onStalled` is told, so the server can report itself failed and be restarted.
   * 0 or unset: no limit.
   */
  stepTimeoutMs?: number;
  onStalled?: (reason: string) => void;
}

export interface StepStats {
  seconds: number;
  sequences: number;
  tokens: number;
  prefillTokens: number;
  /** Running sequences preempted (blocks freed, to be recomputed) to make room for this step. */
  preempted: number;
  /** Tokens sampled on the device (runner.forwardSampled) rather than from downloaded logits. */
  deviceSampled: boolean;
  /** Launched before the previous step returned (lookahead.ts); `seconds` then counts from that step's return. */
  lookahead: boolean;
  /**
   * Host time of this step's phases, ms: schedule (deadlines, proposals, scheduler, KV events),
   * build (StepInput and device sampling plan), launch (the runner call up to its promise:
   * packing), emit (handing the previous step's outputs to the streams, when they were held
   * back to overlap the device: see `overlapEmit`), accept (tokens appended, KV committed,
   * text decoded, outputs queued).
   */
  hostMs: { schedule: number; build: number; launch: number; emit: number; accept: number };
}

export interface Engine {
  readonly spec: ModelSpec;
  readonly backend: "cpu" | "cuda";
  readonly serverId: string;
  readonly blockSize: number;
  readonly numKvBlocks: number;
  /** Longest sequence (prompt + output) served: the model's context capped by the KV capacity (of the smallest pool). */
  readonly maxLen: number;
  readonly maxQueue: number;
  readonly kvFeed: KvFeed;
  generate(params: GenerateParams): GenerateStream;
  load(): LoadSnapshot;
  /** Called after every step and admission change. */
  onLoadChange(listener: () => void): () => void;
  /**
   * The computed KV of a live sequence's prompt and output so far (prefill/decode split). The CUDA runner refuses
   * while a step is in flight, and a steady decode batch keeps one in flight (lookahead.ts): callers there need
   * `lookahead: false` (--sync-decode) or an engine between steps. No RPC calls it yet.
   */
  exportKv(requestId: string): { tokenIds: number[]; kv: KvExport };
  /**
   * Stop admitting (generate fails with unavailable), let live sequences finish
   * for up to `timeoutMs`, then close. Resolves with how many had to be cancelled.
   */
  drain(timeoutMs: number): Promise<number>;
  /** Finish every sequence (cancelled) and stop the loop. */
  close(): Promise<void>;
}
