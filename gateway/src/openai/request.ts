/**
 * The gateway's normalized view of an OpenAI generation request, produced by
 * `parse-chat.ts` / `parse-completion.ts` and consumed by every backend kind.
 * The original body text travels along so OpenAI-HTTP backends get the
 * client's request unchanged.
 */

/** One chat message with its content flattened to text (parts joined by "\n"). */
export interface ChatMessage {
  role: "system" | "developer" | "user" | "assistant" | "tool";
  content: string;
  name?: string;
  /** Assistant tool calls, passed to the chat template as given. */
  tool_calls?: unknown[];
  tool_call_id?: string;
}

export interface SamplingOptions {
  temperature?: number;
  topP?: number;
  topK?: number;
  seed?: number;
  frequencyPenalty?: number;
  presencePenalty?: number;
  /** `logit_bias`: token id -> bias in [-100, 100] (non-empty when set). */
  logitBias?: Record<number, number>;
}

export interface GenerationRequest {
  endpoint: "chat" | "completions";
  model: string;
  stream: boolean;
  /** `stream_options.include_usage`. */
  includeUsage: boolean;
  /**
   * `n`: choices to generate for the prompt (1-128). A dispatch backend runs one sequence per choice on the same
   * server (choice i seeded with seed + i); an OpenAI-HTTP backend gets the body as sent.
   */
  n: number;
  /** `max_completion_tokens`, else `max_tokens`; undefined: until the context is full. */
  maxTokens?: number;
  minTokens?: number;
  ignoreEos?: boolean;
  /** Stop strings (0-4), never empty strings. */
  stop: string[];
  stopTokenIds: number[];
  sampling: SamplingOptions;
  user?: string;
  /** vLLM's `priority`: lower is scheduled first on a dispatch server (an int32). */
  priority?: number;
  /** `prompt_cache_key`: routing affinity. */
  affinityKey?: string;
  /** Chat only. */
  messages?: ChatMessage[];
  /**
   * Chat only: tool definitions for the template; unset when `tool_choice` is "none" (the model is not shown them).
   * A dispatch model whose template announces Hermes tool calls gets them parsed out of its text (tool-calls.ts).
   */
  tools?: unknown[];
  /**
   * Chat only: `tool_choice`: "auto" (the default with tools), "none", "required" or a named function (the last two
   * forced on a dispatch model through JSON mode, forced-tool-call.ts).
   */
  toolChoice?: "auto" | "none" | "required" | { name: string };
  /** Chat only: `parallel_tool_calls` false: at most one call per choice. */
  parallelToolCalls?: boolean;
  /** Chat only: vLLM's `chat_template_kwargs`, extra variables for the chat template (e.g. `enable_thinking`). */
  templateKwargs?: Record<string, unknown>;
  /** Chat only: vLLM's `add_generation_prompt` (default true). */
  addGenerationPrompt?: boolean;
  /** Chat only: vLLM's `continue_final_message`: the model continues the last (assistant) message. */
  continueFinalMessage?: boolean;
  /**
   * Chat only: `response_format: {"type": "json_object"}`: a dispatch model's output is one JSON object, enforced
   * token by token on the server.
   */
  jsonObject?: boolean;
  /** Chat only: `response_format: {"type": "json_schema", ...}`: the schema as JSON text, enforced likewise. */
  jsonSchema?: string;
  /** Completions only: text, or token ids (a batch's first prompt). */
  prompt?: string | number[];
  /** Completions only: `echo`: each choice's text begins with its prompt's (without the prompt's log-probabilities). */
  echo?: boolean;
  /** Completions only: every prompt of a batch (two or more); choice index = prompt index x n + choice. */
  batch?: (string | number[])[];
  /**
   * Log-probabilities asked for (chat `logprobs: true` with `top_logprobs`; completions `logprobs: N`): every
   * generated token's, with its `top` best alternatives (0-20). Undefined: none.
   */
  logprobs?: { top: number };
  /**
   * Parameters only an OpenAI-HTTP backend can honour (e.g. "echo", "tool_choice"
   * with tool_choice), by name; a dispatch backend refuses the request with a 400.
   */
  passthroughOnly: string[];
  /** The request body as received, forwarded verbatim to OpenAI-HTTP backends. */
  rawBody: string;
}
