/**
 * What the RPC layer serves from: the engine and the model's metadata once
 * loaded, and a status. The server listens before the weights are loaded, so
 * health checks answer (NOT_SERVING, "loading 40%") while it loads.
 *
 * @example
 * const state = createServingState();
 * state.setLoading("loading weights");
 * state.setServing(engine, meta);
 */
import type { Engine } from "../engine/engine";

/** The tokenizer in tiktoken form, as GetModelInfo returns it. */
export interface TokenizerInfo {
  pattern: string;
  /** The ranks file: one "base64(token bytes) rank" per line. */
  ranks: Uint8Array;
  specialTokens: Record<string, number>;
  /** Added tokens that are text, not control (e.g. `<tool_call>`): shown in generated text. */
  textTokenIds?: number[];
}

export interface ModelMeta {
  tokenizer: TokenizerInfo;
  chatTemplate: string;
  bosToken: string;
  eosToken: string;
}

export type ServingStatus = "loading" | "serving" | "draining" | "failed";

export interface ServingState {
  readonly status: ServingStatus;
  readonly message: string;
  readonly engine: Engine | null;
  readonly meta: ModelMeta | null;
  setLoading(message: string): void;
  setServing(engine: Engine, meta: ModelMeta): void;
  setDraining(message: string): void;
  setFailed(message: string): void;
}

export function createServingState(): ServingState {
  let status: ServingStatus = "loading";
  let message = "starting";
  let engine: Engine | null = null;
  let meta: ModelMeta | null = null;
  return {
    get status() {
      return status;
    },
    get message() {
      return message;
    },
    get engine() {
      return engine;
    },
    get meta() {
      return meta;
    },
    setLoading(m) {
      status = "loading";
      message = m;
    },
    setServing(e, mm) {
      engine = e;
      meta = mm;
      status = "serving";
      message = "serving";
    },
    setDraining(m) {
      status = "draining";
      message = m;
    },
    setFailed(m) {
      status = "failed";
      message = m;
    },
  };
}
