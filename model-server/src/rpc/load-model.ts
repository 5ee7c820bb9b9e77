/**
 * Loads the served model (src/model) and shapes it for the engine and the RPC
 * layer: the runner, token bytes for text deltas, and the metadata
 * GetModelInfo reports.
 *
 * @example
 * const m = await loadServedModel("model-server/models/tiny-wordnet-moe", { backend: "cpu" });
 * createEngine({ runner: m.runner, tokenBytes: m.tokenBytes, ... });
 */
import type { TokenBytes } from "../engine/detokenizer";
import { tokenBytesFromRanks } from "../engine/token-bytes";
import type { BackendRequest } from "../backend/cuda/select-backend";
import { loadModel, type LoadModelOptions } from "../model/load-model";
import type { ModelRunner } from "../model/runner";
import type { ModelMeta } from "./serving-state";

export interface ServedModel {
  runner: ModelRunner;
  tokenBytes: TokenBytes;
  /** The tokenizer's special token ids. */
  specialTokenIds: number[];
  meta: ModelMeta;
}

export async function loadServedModel(dir: string, o: Omit<LoadModelOptions, "dir"> & { backend: BackendRequest }): Promise<ServedModel> {
  const m = await loadModel({ ...o, dir });
  const t = m.info.tokenizer;
  // The engine streams ids and bytes; the tokenizer's own encoder is the gateway's business.
  m.tokenizer.free();
  return {
    runner: m.runner,
    tokenBytes: tokenBytesFromRanks(t.ranks, t.specialTokens),
    // control tokens only: text tokens such as <tool_call> may be part of a JSON mode answer's frame
    specialTokenIds: Object.values(t.specialTokens).filter((id) => !t.textTokenIds.includes(id)),
    meta: {
      tokenizer: { pattern: t.pattern, ranks: t.ranks, specialTokens: t.specialTokens, textTokenIds: t.textTokenIds },
      chatTemplate: m.info.chatTemplate,
      bosToken: m.info.bosToken,
      eosToken: m.info.eosToken,
    },
  };
}
