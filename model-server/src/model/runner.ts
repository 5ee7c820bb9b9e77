/**
 * The contract between the engine (scheduler, block manager, sampler) and a
 * model on some backend (CPU now, CUDA later). The engine owns bookkeeping:
 * which physical KV blocks a sequence holds. The runner owns tensors: weights
 * and the KV cache storage, addressed by those block ids.
 *
 * Legend: T tokens in the step, V vocabulary size, B block size.
 */

/** One sequence's share of a forward step. */
export interface SeqChunk {
  /** New tokens to run this step: a prefill chunk, one decode token, or k+1 tokens to verify. */
  tokens: Int32Array;
  /** Absolute position of tokens[0]; positions [0, startPos) are already in the KV cache. */
  startPos: number;
  /** Physical KV block ids covering positions [0, startPos + tokens.length), in order. */
  blockTable: Int32Array;
  /** How many trailing positions need logits: 1 for prefill/decode, k+1 for a verify step, 0 for a non-final prefill chunk. */
  numLogits: number;
}

export interface StepInput {
  seqs: SeqChunk[];
}

/** Logits per sequence: [numLogits, V] row-major, fp32. */
export type StepOutput = Float32Array[];

/** What the engine needs to know about the loaded model. */
export interface ModelSpec {
  modelId: string;
  architecture: string;
  vocabSize: number;
  maxContext: number;
  numLayers: number;
  eosTokenIds: number[];
}

/** A sequence's KV for the given blocks, in a backend-independent layout (prefill/decode split). */
export interface KvExport {
  numBlocks: number;
  blockSize: number;
  /** [layers, 2 (k,v), blocks, B, kvHeads, headDim] fp32 or bf16 bytes. */
  data: Uint8Array;
  dtype: "f32" | "bf16";
}

export interface ModelRunner {
  readonly spec: ModelSpec;
  readonly backend: "cpu" | "cuda";
  /** Allocate (or reallocate) KV storage for `numBlocks` blocks of `blockSize` tokens. */
  allocateKv(numBlocks: number, blockSize: number): void;
  /** Bytes of KV storage one block takes (for sizing the cache from a memory budget). */
  kvBytesPerBlock(blockSize: number): number;
  /** Run one forward step over all chunks. Resolves off the event loop's critical path. */
  forward(step: StepInput): Promise<StepOutput>;
  /** Copy blocks out / in (prefill-decode split; the engine decides which ids). */
  exportKv(blockIds: Int32Array): KvExport;
  importKv(blockIds: Int32Array, kv: KvExport): void;
  /** Release weights and KV storage. */
  close(): void;
}
