/**
 * Everything the engine needs from a model directory, in one call: the
 * ModelRunner, the tokenizer (tiktoken form included), the chat template, and
 * the ModelInfo fields GetModelInfo reports.
 *
 * @example
 *   const m = await loadModel({ dir: "model-server/models/tiny-wordnet-moe" });
 *   m.runner.allocateKv(256, 16);          // the model runs in a worker thread by default
 *   const ids = m.tokenizer.encode(renderChat(m.chat, [{ role: "user", content: "What is a dog?" }], true), { allowSpecial: true });
 */
import type { ModelConfig } from "./config";
import { createCpuRunner } from "./cpu-runner";
import type { ModelRunner } from "./runner";
import { createWorkerRunner } from "./worker-runner";
import { createCudaRunner } from "./cuda-runner";
import { createCudaEpRunner } from "../parallel/cuda-ep-runner";
import { selectBackend, type BackendRequest } from "../backend/cuda/select-backend";
import { loadChatTemplate, type ChatTemplate } from "../tokenizer/chat-template";
import { loadTokenizer, type Tokenizer } from "../tokenizer/tokenizer";
import { ModelLoadError } from "../loader/errors";

export interface LoadModelOptions {
  dir: string;
  /** "cpu" (default), "cuda" (fails without a usable GPU), or "auto" (CUDA when usable, else CPU, logged). */
  backend?: BackendRequest;
  modelId?: string;
  /** Use the native CPU kernels when built (default true). */
  native?: boolean;
  /** Run the model in a worker thread so forward() never blocks this thread's event loop (default true). */
  worker?: boolean;
  onProgress?: (message: string) => void;
  /** Expert parallelism over this many GPUs (CUDA only; default 1: off). */
  ep?: number;
  /** EP: the low-latency exchange's largest per-GPU share, and the most tokens a GPU may get in a step. */
  epLowLatencyTokens?: number;
  epMaxTokensPerRank?: number;
  /** EP: called once if the GPU group fails inside a step and can serve no more. */
  onFatal?: (message: string) => void;
  /** CUDA: routed experts int8 weight-only (true overrides DISPATCH_CUDA_INT8_EXPERTS; the CPU backend ignores it, said through onProgress). */
  int8Experts?: boolean;
}

/** A ModelRunner plus what the loader learned about the model. */
export interface LoadedRunner extends ModelRunner {
  readonly config: ModelConfig;
  /** Whether the native CPU kernels are in use. */
  readonly native: boolean;
}

/** What GetModelInfo reports (block size and server id are the engine's). */
export interface ModelInfoFields {
  modelId: string;
  architecture: string;
  chatTemplate: string;
  bosToken: string;
  eosToken: string;
  eosTokenIds: number[];
  maxContext: number;
  vocabSize: number;
  backend: "cpu" | "cuda";
  tokenizer: {
    kind: "tiktoken";
    pattern: string;
    /** tiktoken ranks file bytes ("base64 rank" lines). */
    ranks: Uint8Array;
    specialTokens: Record<string, number>;
    /** Added tokens that decode to their text (not special). */
    textTokenIds: number[];
  };
}

export interface LoadedModel {
  runner: LoadedRunner;
  tokenizer: Tokenizer;
  chat: ChatTemplate;
  info: ModelInfoFields;
}

export async function loadModel(o: LoadModelOptions): Promise<LoadedModel> {
  const backend = selectBackend(o.backend ?? "cpu").backend;
  const tokenizer = loadTokenizer(o.dir);
  const chat = loadChatTemplate(o.dir);
  const eosFromTokenizer = chat.eosToken && tokenizer.specialTokens[chat.eosToken] !== undefined ? [tokenizer.specialTokens[chat.eosToken]!] : [];
  const runnerOptions = { dir: o.dir, modelId: o.modelId, native: o.native, extraEosIds: eosFromTokenizer, onProgress: o.onProgress };
  if (o.int8Experts && backend !== "cuda") o.onProgress?.("int8 experts need the CUDA backend: the CPU backend serves the checkpoint's weights");
  let runner: LoadedRunner;
  try {
    if ((o.ep ?? 1) > 1) {
      if (backend !== "cuda") throw new ModelLoadError("unsupported_model", `expert parallelism (--ep ${o.ep}) needs the CUDA backend`);
      runner = await createCudaEpRunner({ ...runnerOptions, ranks: o.ep!, lowLatencyMaxTokens: o.epLowLatencyTokens, maxTokensPerRank: o.epMaxTokensPerRank, onFatal: o.onFatal });
    } else if (backend === "cuda") runner = await createCudaRunner({ ...runnerOptions, int8Experts: o.int8Experts ? true : undefined });
    else runner = o.worker === false ? await createCpuRunner(runnerOptions) : await createWorkerRunner(runnerOptions);
  } catch (e) {
    tokenizer.free();
    throw e;
  }
  if (tokenizer.vocabSize > runner.spec.vocabSize) {
    tokenizer.free();
    runner.close();
    throw new ModelLoadError("unsupported_tokenizer", `tokenizer has ${tokenizer.vocabSize} ids but the model's vocabulary is ${runner.spec.vocabSize}`);
  }
  return {
    runner,
    tokenizer,
    chat,
    info: {
      modelId: runner.spec.modelId,
      architecture: runner.spec.architecture,
      chatTemplate: chat.template,
      bosToken: chat.bosToken,
      eosToken: chat.eosToken,
      eosTokenIds: runner.spec.eosTokenIds,
      maxContext: runner.spec.maxContext,
      vocabSize: runner.spec.vocabSize,
      backend: runner.backend,
      tokenizer: {
        kind: "tiktoken",
        pattern: tokenizer.spec.pattern,
        ranks: new TextEncoder().encode(tokenizer.spec.ranks),
        specialTokens: tokenizer.specialTokens,
        textTokenIds: tokenizer.spec.textTokenIds,
      },
    },
  };
}
