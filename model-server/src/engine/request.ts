/**
 * What a caller asks of the engine and what it streams back, and the checks a
 * request passes before it is admitted (each failure an invalid_argument that
 * says what was wrong).
 *
 * @example
 * validateRequest({ promptTokenIds: [1, 2], sampling: { temperature: 0.7 } }, { maxLen: 4096, vocabSize: 32000, hasTokenizer: true });
 */
import type { KvExport } from "../model/runner";
import { EngineError } from "./errors";
import type { SampledToken } from "./sampler";
import { DEFAULT_SAMPLING, type FinishReason, type SamplingOptions, type StopOptions } from "./sequence";

/** Per-sequence lifecycle callbacks (metrics, traces); all optional. */
export interface SequenceObserver {
  /** Joined the running batch for the first time. */
  admitted?(o: { cachedTokens: number; batchSize: number; queueMs: number }): void;
  /** Tokens streamed (first call: the first token). */
  tokens?(count: number): void;
  finished?(o: { outputTokens: number; reason: FinishReason }): void;
}

export interface GenerateParams {
  requestId?: string;
  promptTokenIds: readonly number[];
  sampling?: Partial<SamplingOptions>;
  /** `maxTokens` 0 or absent: until the context is full. */
  stop?: Partial<StopOptions>;
  /** Absolute deadline, ms since the epoch; 0: none. */
  deadlineMs?: number;
  returnText?: boolean;
  topLogprobs?: number;
  /** Scheduling priority: lower is admitted first and preempted last (vLLM's); an int32, 0 by default. */
  priority?: number;
  /**
   * "json_object": the output is one JSON object; "json_schema": one that fits `jsonSchema` (json-schema.ts).
   * json-constraint.ts enforces either; both need the server's tokenizer.
   */
  responseFormat?: "text" | "json_object" | "json_schema";
  /** The schema of "json_schema" (parsed JSON). */
  jsonSchema?: unknown;
  /** JSON mode: literal text before and after the object (a forced tool call's tags); the output ends after it. */
  jsonPrefix?: string;
  jsonSuffix?: string;
  /** JSON mode on a reasoning model: the output may open with a `<think>` block ("may") or is inside one ("inside") before the object. */
  jsonThinking?: "may" | "inside";
  /** KV of the prompt's leading positions computed elsewhere (prefill/decode split). */
  importedKv?: KvExport;
  observer?: SequenceObserver;
}

export interface Usage {
  promptTokens: number;
  completionTokens: number;
  cachedPromptTokens: number;
}

export interface GenerateOutput {
  tokenIds: number[];
  textDelta: string;
  logprobs: SampledToken[];
  finishReason: FinishReason | null;
  usage?: Usage;
  /** On the first message only. */
  queueTimeMs?: number;
}

export interface GenerateStream extends AsyncIterable<GenerateOutput> {
  readonly requestId: string;
  /** Abort the sequence and free its blocks (no-op once finished). */
  cancel(): void;
}

export interface RequestLimits {
  /** Longest prompt + output served. */
  maxLen: number;
  vocabSize: number;
  /** Whether text deltas can be produced. */
  hasTokenizer: boolean;
}

/** Most logit_bias entries a request may carry (OpenAI takes 300; vLLM has no bound). */
export const MAX_LOGIT_BIAS = 1024;

export function validateRequest(p: GenerateParams, limits: RequestLimits): void {
  const { maxLen, vocabSize } = limits;
  const n = p.promptTokenIds.length;
  if (n === 0) throw new EngineError("invalid_argument", "prompt_token_ids is empty");
  if (n >= maxLen) throw new EngineError("invalid_argument", `prompt has ${n} tokens; this server's context is ${maxLen} tokens (prompt must leave room for one generated token)`);
  for (const t of p.promptTokenIds) {
    if (!Number.isInteger(t) || t < 0 || t >= vocabSize) throw new EngineError("invalid_argument", `prompt token id ${t} is outside the vocabulary [0, ${vocabSize})`);
  }
  const s = { ...DEFAULT_SAMPLING, ...p.sampling };
  if (!(s.temperature >= 0) || !Number.isFinite(s.temperature)) throw new EngineError("invalid_argument", `temperature must be >= 0, got ${s.temperature}`);
  if (!(s.topP >= 0 && s.topP <= 1)) throw new EngineError("invalid_argument", `top_p must be in (0, 1], got ${s.topP}`);
  for (const [name, v] of [["frequency_penalty", s.frequencyPenalty], ["presence_penalty", s.presencePenalty]] as const) {
    if (!(v >= -2 && v <= 2)) throw new EngineError("invalid_argument", `${name} must be in [-2, 2], got ${v}`);
  }
  if (s.logitBias) {
    if (s.logitBias.size > MAX_LOGIT_BIAS) throw new EngineError("invalid_argument", `logit_bias has ${s.logitBias.size} entries; at most ${MAX_LOGIT_BIAS}`);
    for (const [t, b] of s.logitBias) {
      if (!Number.isInteger(t) || t < 0 || t >= vocabSize) throw new EngineError("invalid_argument", `logit_bias token id ${t} is outside the vocabulary [0, ${vocabSize})`);
      if (!(b >= -100 && b <= 100)) throw new EngineError("invalid_argument", `logit_bias values must be in [-100, 100], got ${b} for token ${t}`);
    }
  }
  if (p.priority !== undefined && !(Number.isInteger(p.priority) && p.priority >= -(2 ** 31) && p.priority < 2 ** 31)) {
    throw new EngineError("invalid_argument", `priority must be an int32, got ${p.priority}`);
  }
  const json = p.responseFormat === "json_object" || p.responseFormat === "json_schema";
  if (json && !limits.hasTokenizer) throw new EngineError("invalid_argument", `response_format ${p.responseFormat} is not available: the server has no tokenizer`);
  if (json && (p.stop?.ignoreEos || (p.stop?.minTokens ?? 0) > 0)) {
    throw new EngineError("invalid_argument", `response_format ${p.responseFormat} ends at the end of the object: ignore_eos and min_tokens do not apply`);
  }
  if (p.returnText && !limits.hasTokenizer) throw new EngineError("invalid_argument", "return_text is not available: the server has no tokenizer");
  const minTokens = p.stop?.minTokens ?? 0;
  const maxTokens = p.stop?.maxTokens ?? 0;
  if (maxTokens > 0 && minTokens > maxTokens) throw new EngineError("invalid_argument", `min_tokens (${minTokens}) exceeds max_tokens (${maxTokens})`);
  if ((p.topLogprobs ?? 0) > 20) throw new EngineError("invalid_argument", `top_logprobs must be <= 20, got ${p.topLogprobs}`);
}
