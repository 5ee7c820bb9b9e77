/**
 * The GPU soak's traffic (device-soak.ts): a seeded mix of what production clients send through
 * the gateway, one request per index. Pure: the same seed and index give the same request.
 *
 * - `stream`: a streamed completion of token ids; prompts log-uniform in length, some opening with
 *   one of a few shared prefixes (prefix-cache hits while other sequences hold the same blocks);
 *   greedy or sampled (temperature, top-p, top-k, seeded or not), some with log-probabilities,
 *   penalties, stop strings or stop token ids, some with `ignore_eos` (then exactly max_tokens);
 * - `cancel`: the same, aborted by the client after a few streamed chunks;
 * - `plain`: not streamed;
 * - `chat`: a chat completion of text (the model's chat template), streamed or not;
 * - `invalid`: a request the gateway must refuse in OpenAI's error shape (a sampling value out of
 *   range, n above 128, an empty batch of prompts, a prompt past the context, an unknown model, a body
 *   that is not JSON...), with the status it must get.
 * With `features`, also several choices, batches of prompts, JSON mode (json_object and json_schema), logit_bias,
 * priority, echo, and chat requests sent as the Responses API's or Anthropic's Messages API's
 * (SoakMixOptions.features).
 *
 * @example
 *   const rng = createSeededRand(7);
 *   const r = soakRequest(0, rng, { model: "m", vocab: 4000, maxPrompt: 256, maxOutput: 32, contextLen: 1024, seed: 7 });
 *   r.kind;   // "stream" | "cancel" | "plain" | "chat" | "invalid"
 */
import { createSeededRand } from "@dispatch/common/src/seeded-rand";

export interface SoakMixOptions {
  model: string;
  /** Token ids are drawn from [lowId, vocab): ordinary tokens, no specials. */
  vocab: number;
  lowId?: number;
  /** Longest valid prompt, tokens (shortest: 4). */
  maxPrompt: number;
  /** Largest max_tokens of a valid request (smallest: 1). */
  maxOutput: number;
  /** The model's context: an over-long prompt takes this plus 16 tokens. */
  contextLen: number;
  /** Seeds the shared prefixes (the same for every index). */
  seed: number;
  /** How many shared prefixes (each maxPrompt / 4 tokens, at least 4). */
  prefixes?: number;
  /**
   * Also the API's newer features, drawn from a random stream of their own (so the rest of the traffic is the same
   * with or without them): several choices (`n`), batches of prompts, JSON mode, `logit_bias`, `priority`, `echo`,
   * chat sent to `/v1/responses` (stored or not) or to Anthropic's `/v1/messages`.
   */
  features?: boolean;
}

export type SoakKind = "stream" | "cancel" | "plain" | "chat" | "invalid";

export interface SoakRequest {
  index: number;
  kind: SoakKind;
  path: "/v1/completions" | "/v1/chat/completions" | "/v1/responses" | "/v1/messages";
  /** The JSON body, or raw text (the not-JSON case). */
  body: Record<string, unknown> | string;
  stream: boolean;
  /** The client aborts the stream after this many content chunks. */
  cancelAfter?: number;
  /** The HTTP status the gateway must answer. */
  expectStatus: number;
  maxTokens?: number;
  /** A prompt of token ids: its length, which usage.prompt_tokens must report. */
  promptTokens?: number;
  /** `ignore_eos` with no stop condition: the completion must be exactly maxTokens tokens, finish "length". */
  exactLength?: boolean;
  /** Choices in the response (n x prompts; 1 when absent): each must finish; usage counts all of them. */
  choices?: number;
  /** JSON mode: a choice that finishes "stop" must be one JSON object. */
  json?: boolean;
  /** What the request exercises, for the report ("stream greedy prefix logprobs=3"). */
  label: string;
}

type Rand = () => number;

const KINDS: [SoakKind, number][] = [
  ["stream", 0.5],
  ["cancel", 0.12],
  ["plain", 0.13],
  ["chat", 0.15],
  ["invalid", 0.1],
];

/** Shared prefixes of a mix, built once per options object (a pure function of the seed). */
const prefixCache = new WeakMap<SoakMixOptions, number[][]>();
function sharedPrefixes(o: SoakMixOptions): number[][] {
  let p = prefixCache.get(o);
  if (!p) {
    const rng = createSeededRand(o.seed ^ 0x5eed);
    const len = Math.max(4, Math.floor(o.maxPrompt / 4));
    p = Array.from({ length: o.prefixes ?? 4 }, () => tokens(rng, o, len));
    prefixCache.set(o, p);
  }
  return p;
}

function tokens(rng: Rand, o: SoakMixOptions, n: number): number[] {
  const low = o.lowId ?? 0;
  return Array.from({ length: n }, () => low + Math.floor(rng() * (o.vocab - low)));
}

/** An integer log-uniform in [lo, hi]. */
function logUniform(rng: Rand, lo: number, hi: number): number {
  if (hi <= lo) return lo;
  return Math.min(hi, Math.floor(Math.exp(Math.log(lo) + rng() * (Math.log(hi + 1) - Math.log(lo)))));
}

function pick<T>(rng: Rand, weighted: [T, number][]): T {
  let r = rng() * weighted.reduce((s, [, w]) => s + w, 0);
  for (const [v, w] of weighted) if ((r -= w) < 0) return v;
  return weighted[weighted.length - 1]![0];
}

const WORDS = ["alpha", "river", "stone", "light", "cloud", "green", "north", "paper", "seven", "quiet", "metal", "orange"];

export function soakRequest(index: number, rng: Rand, o: SoakMixOptions): SoakRequest {
  if (!(o.vocab > (o.lowId ?? 0) && o.maxPrompt >= 4 && o.maxOutput >= 1 && o.contextLen > o.maxPrompt + o.maxOutput)) {
    throw new RangeError(`soak mix: vocab, maxPrompt >= 4, maxOutput >= 1 and contextLen > maxPrompt + maxOutput are required`);
  }
  const kind = pick(rng, KINDS);
  if (kind === "invalid") return invalidRequest(index, rng, o);
  const labels: string[] = [kind];
  const body: Record<string, unknown> = { model: o.model };
  const maxTokens = kind === "cancel" ? logUniform(rng, 8, Math.max(8, o.maxOutput)) : logUniform(rng, 1, o.maxOutput);
  body.max_tokens = maxTokens;
  let path: SoakRequest["path"] = "/v1/completions";
  if (kind === "chat") {
    path = "/v1/chat/completions";
    const words = logUniform(rng, 1, Math.max(1, Math.floor(o.maxPrompt / 3)));
    body.messages = [
      ...(rng() < 0.5 ? [{ role: "system", content: "You are a terse assistant." }] : []),
      { role: "user", content: Array.from({ length: words }, () => WORDS[Math.floor(rng() * WORDS.length)]).join(" ") },
    ];
  } else {
    const usePrefix = rng() < 0.3;
    const prefix = usePrefix ? sharedPrefixes(o)[Math.floor(rng() * (o.prefixes ?? 4))]! : [];
    const rest = logUniform(rng, 4, Math.max(4, o.maxPrompt - prefix.length));
    body.prompt = [...prefix, ...tokens(rng, o, rest)];
    if (usePrefix) labels.push("prefix");
  }
  const stream = kind === "stream" || kind === "cancel" || (kind === "chat" && rng() < 0.7);
  body.stream = stream;
  if (stream) body.stream_options = { include_usage: true };
  if (rng() < 0.35) {
    body.temperature = 0;
    labels.push("greedy");
  } else {
    body.temperature = +(0.5 + rng() * 0.7).toFixed(2);
    if (rng() < 0.6) body.top_p = +(0.8 + rng() * 0.2).toFixed(2);
    if (rng() < 0.4) body.top_k = pick(rng, [[20, 1], [50, 1], [-1, 1]]);
    if (rng() < 0.6) body.seed = Math.floor(rng() * 2 ** 31);
    labels.push("sampled");
  }
  if (rng() < 0.15) {
    const n = Math.floor(rng() * 6);
    if (kind === "chat") Object.assign(body, { logprobs: true, top_logprobs: n });
    else body.logprobs = n;
    labels.push(`logprobs=${n}`);
  }
  if (rng() < 0.1) {
    body.frequency_penalty = +(rng() * 2 - 1).toFixed(2);
    body.presence_penalty = +(rng() * 2 - 1).toFixed(2);
    labels.push("penalties");
  }
  let stops = false;
  if (rng() < 0.08) {
    body.stop = ["zq"];
    stops = true;
    labels.push("stop");
  } else if (rng() < 0.08) {
    body.stop_token_ids = tokens(rng, o, 3);
    stops = true;
    labels.push("stop_ids");
  }
  const ignoreEos = rng() < 0.25;
  if (ignoreEos) {
    body.ignore_eos = true;
    labels.push("ignore_eos");
  }
  const cancelAfter = kind === "cancel" ? 1 + Math.floor(rng() * Math.min(16, maxTokens - 1)) : undefined;
  const req: SoakRequest = { index, kind, path, body, stream, cancelAfter, expectStatus: 200, maxTokens, exactLength: ignoreEos && !stops, label: "" };
  if (o.features) addFeatures(req, createSeededRand((o.seed * 1_000_003 + index) >>> 0), o, labels);
  const prompts = Array.isArray(body.prompt) && Array.isArray((body.prompt as unknown[])[0]) ? (body.prompt as number[][]) : Array.isArray(body.prompt) ? [body.prompt as number[]] : null;
  req.promptTokens = prompts ? prompts.reduce((n, p) => n + p.length, 0) : undefined;
  req.label = labels.join(" ");
  return req;
}

/** The schema of the mix's json_schema requests: fixed keys, enums, a boolean, a bounded array: it always closes. */
export const SOAK_SCHEMA = {
  type: "object",
  properties: { kind: { enum: ["a", "b", "c"] }, ok: { type: "boolean" }, tags: { type: "array", items: { enum: ["x", "y"] }, maxItems: 2 } },
  required: ["kind", "ok"],
  additionalProperties: false,
};

/** The API's newer features on a valid request (SoakMixOptions.features), from their own random stream. */
function addFeatures(req: SoakRequest, rng: Rand, o: SoakMixOptions, labels: string[]): void {
  const body = req.body as Record<string, unknown>;
  let choices = 1;
  if (req.kind === "chat" && rng() < 0.2) {
    // JSON mode ends at the object's close: no ignore_eos, no min_tokens; half of it under a schema
    const schema = rng() < 0.5;
    body.response_format = schema ? { type: "json_schema", json_schema: { name: "item", schema: SOAK_SCHEMA } } : { type: "json_object" };
    delete body.ignore_eos;
    req.exactLength = false;
    req.json = true;
    labels.push(schema ? "json_schema" : "json");
  } else if (req.kind === "chat" && rng() < 0.25) {
    toResponses(req, rng);
    labels.push(`responses${(req.body as Record<string, unknown>).store ? " stored" : ""}`);
  } else if (req.kind === "chat" && rng() < 0.3) {
    toMessages(req);
    labels.push("messages");
  } else if (req.kind === "plain" && rng() < 0.3) {
    const more = tokens(rng, o, logUniform(rng, 4, Math.max(4, o.maxPrompt >> 2)));
    body.prompt = [body.prompt as number[], more];
    choices = 2;
    labels.push("batch=2");
    if (body.logprobs === undefined && rng() < 0.3) {
      body.echo = true;
      labels.push("echo");
    }
  }
  // the Responses and Messages APIs have no n
  const translated = req.path === "/v1/responses" || req.path === "/v1/messages";
  if (!req.json && !translated && rng() < 0.15) {
    const n = 2 + Math.floor(rng() * 2);
    body.n = n;
    choices *= n;
    labels.push(`n=${n}`);
  }
  // (Anthropic's Messages API has neither logit_bias nor priority); `out`: the body as sent, a translated request's own
  const messages = req.path === "/v1/messages";
  const out = req.body as Record<string, unknown>;
  if (!messages && rng() < 0.1) {
    out.logit_bias = Object.fromEntries(tokens(rng, o, 2).map((t, i) => [String(t), i === 0 ? 5 : -5]));
    labels.push("logit_bias");
  }
  if (!messages && rng() < 0.2) {
    out.priority = Math.floor(rng() * 7) - 3;
    labels.push(`priority=${out.priority}`);
  }
  if (choices > 1) req.choices = choices;
}

/** A chat request as the Responses API's: its messages as input items, the same sampling and limits. */
function toResponses(req: SoakRequest, rng: Rand): void {
  const { messages, max_tokens, stream_options: _, logprobs, top_logprobs, ...rest } = req.body as Record<string, unknown>;
  const body: Record<string, unknown> = { ...rest, input: messages, max_output_tokens: max_tokens, store: rng() < 0.5 };
  if (logprobs) Object.assign(body, { top_logprobs, include: ["message.output_text.logprobs"] });
  req.body = body;
  req.path = "/v1/responses";
}

/**
 * A chat request as Anthropic's Messages API's: the system message as `system`, the same limits; what that API
 * lacks (ignore_eos, seeds, penalties, log-probabilities, stop token ids) is left out, temperature kept within 0-1.
 */
function toMessages(req: SoakRequest): void {
  const b = req.body as Record<string, unknown>;
  const all = b.messages as { role: string; content: string }[];
  const body: Record<string, unknown> = { model: b.model, max_tokens: b.max_tokens, stream: b.stream, messages: all.filter((m) => m.role !== "system") };
  const system = all.find((m) => m.role === "system");
  if (system) body.system = system.content;
  if (typeof b.temperature === "number") body.temperature = Math.min(1, b.temperature);
  if (b.top_p !== undefined) body.top_p = b.top_p;
  if (typeof b.top_k === "number" && b.top_k > 0) body.top_k = b.top_k;
  if (Array.isArray(b.stop)) body.stop_sequences = b.stop;
  req.body = body;
  req.path = "/v1/messages";
  req.exactLength = false;
}

/** Requests the gateway must refuse, and the status each must get. */
function invalidRequest(index: number, rng: Rand, o: SoakMixOptions): SoakRequest {
  const ok = (): Record<string, unknown> => ({ model: o.model, prompt: tokens(rng, o, 8), max_tokens: 4 });
  const cases: [string, () => Record<string, unknown> | string, number][] = [
    ["temperature=5", () => ({ ...ok(), temperature: 5 }), 400],
    ["max_tokens=0", () => ({ ...ok(), max_tokens: 0 }), 400],
    ["n=129", () => ({ ...ok(), n: 129 }), 400],
    // (a batch of two prompts until batches became a feature; the same draws keep the seeded traffic as it was)
    ["empty prompt batch", () => ({ ...ok(), prompt: [tokens(rng, o, 4), tokens(rng, o, 4)].slice(2) }), 400],
    ["logprobs=50", () => ({ ...ok(), logprobs: 50 }), 400],
    ["past the context", () => ({ ...ok(), prompt: tokens(rng, o, o.contextLen + 16) }), 400],
    ["unknown model", () => ({ ...ok(), model: `${o.model}-nope` }), 404],
    ["not JSON", () => '{"model": "x", "prompt": [1, 2', 400],
    ["token id past the vocabulary", () => ({ ...ok(), prompt: [1, 2, 0x7fffffff] }), 400],
  ];
  const [name, make, status] = cases[Math.floor(rng() * cases.length)]!;
  const body = make();
  if (typeof body !== "string") body.stream = rng() < 0.5;
  return { index, kind: "invalid", path: "/v1/completions", body, stream: typeof body !== "string" && body.stream === true, expectStatus: status, label: `invalid ${name}` };
}
