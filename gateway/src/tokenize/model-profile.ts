/**
 * Everything the gateway needs to serve one dispatch model: its tokenizer,
 * chat template and block layout, built from GetModelInfo once per model and
 * cached (a second backend reporting the same model and tokenizer reuses it).
 *
 * @example
 * const profile = getModelProfile(info);
 * const { tokenIds, blockHashes } = profile.prepare(request);
 */
import { hashBlocks, rootHash } from "@dispatch/common/src/block-hash";
import { badRequest } from "../errors";
import type { GenerationRequest } from "../openai/request";
import { promptOpensReasoning, templateHasReasoning } from "../openai/reasoning";
import { templateHasToolCalls } from "../openai/tool-calls";
import { type ChatTemplate, createChatTemplate } from "./chat-template";
import { createTokenizer, type Tokenizer } from "./tokenizer";

/** The model facts GetModelInfo reports, as plain data (see rpc/model-client.ts). */
export interface ModelInfoView {
  modelId: string;
  tokenizer: { kind: string; pattern: string; ranks: Uint8Array; specialTokens: Record<string, number>; textTokenIds?: number[] };
  chatTemplate: string;
  bosToken: string;
  eosToken: string;
  eosTokenIds: number[];
  blockSize: number;
  maxContext: number;
  serverId: string;
}

export interface PreparedPrompt {
  tokenIds: Uint32Array;
  /** Chat: the rendered prompt leaves a `<think>` block open, so the generation starts inside it (reasoning.ts). */
  opensReasoning?: boolean;
  /** Chat: the rendered prompt ends with a closed `<think>` block (thinking turned off, e.g. Qwen3's enable_thinking false). */
  closesReasoning?: boolean;
  /**
   * Computed on first read, so a request routed without them (one candidate backend) hashes
   * its blocks after its Generate call went out, in the routing bookkeeping, not before it.
   */
  readonly blockHashes: bigint[];
}

export interface ModelProfile {
  readonly modelId: string;
  readonly tokenizer: Tokenizer;
  readonly blockSize: number;
  readonly maxContext: number;
  /** The chat template announces Hermes tool calls (`<tool_call>`): `tools` are rendered and parsed back out. */
  readonly toolCalls: boolean;
  /** The chat template announces `<think>` blocks (Qwen3, QwQ, DeepSeek-R1): the thinking can be split off. */
  readonly reasoning: boolean;
  /** Render (chat) and tokenize the prompt, hash its blocks; 400 when it does not fit or asks for tools the model has no format for. */
  prepare(req: GenerationRequest): PreparedPrompt;
}

const cache = new Map<string, ModelProfile>();

function cacheKey(info: ModelInfoView): string {
  const t = info.tokenizer;
  return `${info.modelId}\0${Bun.hash(t.ranks)}\0${Bun.hash(t.pattern)}\0${Bun.hash(info.chatTemplate)}\0${info.blockSize}\0${(t.textTokenIds ?? []).join(",")}`;
}

/** The cached profile for this model info, built on first use. */
export function getModelProfile(info: ModelInfoView): ModelProfile {
  const key = cacheKey(info);
  let p = cache.get(key);
  if (!p) {
    p = createModelProfile(info);
    cache.set(key, p);
  }
  return p;
}

export function createModelProfile(info: ModelInfoView): ModelProfile {
  if (info.tokenizer.kind !== "tiktoken") {
    throw new Error(`model ${info.modelId}: tokenizer kind '${info.tokenizer.kind}' is not supported (only 'tiktoken')`);
  }
  const tokenizer = createTokenizer({
    ranks: new TextDecoder().decode(info.tokenizer.ranks),
    pattern: info.tokenizer.pattern,
    specialTokens: info.tokenizer.specialTokens,
    textTokenIds: info.tokenizer.textTokenIds,
  });
  let template: ChatTemplate | undefined;
  const root = rootHash(info.modelId);
  const blockSize = info.blockSize > 0 ? info.blockSize : 16;
  const toolCalls = templateHasToolCalls(info.chatTemplate);
  const reasoning = templateHasReasoning(info.chatTemplate);
  return {
    modelId: info.modelId,
    tokenizer,
    blockSize,
    maxContext: info.maxContext,
    toolCalls,
    reasoning,
    prepare(req) {
      let tokenIds: Uint32Array;
      let opensReasoning: boolean | undefined;
      let closesReasoning: boolean | undefined;
      if (req.endpoint === "chat") {
        if (!info.chatTemplate) throw badRequest(`Model '${info.modelId}' has no chat template: use /v1/completions.`, "model");
        if (req.tools && !toolCalls) {
          throw badRequest(`'tools' is not supported by model '${info.modelId}': its chat template has no tool-call format.`, "tools", "unsupported_parameter");
        }
        template ??= createChatTemplate(info.chatTemplate, { bosToken: info.bosToken, eosToken: info.eosToken });
        const options = { kwargs: req.templateKwargs, addGenerationPrompt: req.addGenerationPrompt, continueFinalMessage: req.continueFinalMessage };
        const text = template.render(req.messages ?? [], req.tools, options);
        if (reasoning) {
          opensReasoning = promptOpensReasoning(text);
          closesReasoning = /<\/think>\s*$/.test(text);
        }
        tokenIds = tokenizer.encode(text);
      } else if (typeof req.prompt === "string") {
        tokenIds = tokenizer.encode(req.prompt);
      } else {
        const ids = req.prompt ?? [];
        const vocab = tokenizer.vocabSize;
        tokenIds = new Uint32Array(ids.length);
        for (let i = 0; i < ids.length; i++) {
          const id = ids[i]!;
          if (id >= vocab) throw badRequest(`Token id ${id} is outside the vocabulary (size ${vocab}).`, "prompt");
          tokenIds[i] = id;
        }
      }
      if (tokenIds.length === 0) throw badRequest("The prompt is empty.", req.endpoint === "chat" ? "messages" : "prompt");
      const limit = info.maxContext;
      if (limit > 0) {
        const want = tokenIds.length + (req.maxTokens ?? 0);
        if (tokenIds.length >= limit || want > limit) {
          throw badRequest(
            `This model's maximum context length is ${limit} tokens; the prompt has ${tokenIds.length} tokens` +
              (req.maxTokens ? ` and ${req.maxTokens} were requested for the completion.` : "."),
            req.endpoint === "chat" ? "messages" : "prompt",
            "context_length_exceeded",
          );
        }
      }
      const ids = tokenIds;
      let hashes: bigint[] | undefined;
      return {
        tokenIds,
        opensReasoning,
        closesReasoning,
        get blockHashes() {
          return (hashes ??= hashBlocks(ids, blockSize, root));
        },
      };
    },
  };
}
