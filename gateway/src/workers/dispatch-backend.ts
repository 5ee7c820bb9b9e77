/**
 * A dispatch model server over Connect-RPC. The gateway renders and
 * tokenizes the prompt (tokenizer from GetModelInfo), sends token ids, and
 * turns the token stream into OpenAI output itself (UTF-8-safe
 * detokenization, stop strings). Model info is fetched on the first
 * successful probe and again whenever the server returns after an outage
 * (it may have restarted with another model).
 *
 * @example
 * const b = createDispatchBackend({ id: "ms-0", url: "http://127.0.0.1:9000", protocol: "connect" });
 * await b.probe(AbortSignal.timeout(2000)); // health + model info
 */
import { badRequest, GatewayError, serviceUnavailable } from "../errors";

import { createStopMatcher } from "../openai/stop-matcher";
import { createTextAssembler } from "../openai/text-assembler";
import { createLogprobFormatter } from "../openai/logprobs";
import { createTokenStreamRenderer } from "../openai/token-stream";
import { createUtf8Detokenizer } from "../openai/utf8-detokenizer";
import { createModelClient, type GenerateStep, type ModelClient, type RpcProtocol } from "../rpc/model-client";
import { getModelProfile, type ModelProfile, type PreparedPrompt } from "../tokenize/model-profile";
import { ttftMark } from "../telemetry/ttft-marks";
import type { Backend, Call, CallStats, Job } from "./backend";
import { mergeChoiceCalls } from "./choices-call";
import { echoText, responseFormat } from "./request-extras";

export interface DispatchBackendOptions {
  id: string;
  url: string;
  protocol: RpcProtocol;
  /** Injected for tests; defaults to a Connect client for `url`. */
  client?: ModelClient;
  /** upstream.connect_timeout_ms for the default client. */
  connectTimeoutMs?: number;
  /**
   * server.reasoning_parser: split a reasoning model's `<think>` block into `reasoning_content` where the model's
   * template announces one (default true); false: the thinking stays in the content as generated.
   */
  reasoning?: boolean;
}

export interface DispatchBackend extends Backend {
  readonly client: ModelClient;
}

function engineError(finish: GenerateStep["finish"], where: string): GatewayError {
  if (finish === "deadline") return new GatewayError(504, `Model server ${where} hit the request deadline.`, "server_error", "upstream_timeout");
  if (finish === "cancelled") return new GatewayError(502, `Model server ${where} cancelled the sequence.`, "server_error", "upstream_cancelled");
  return new GatewayError(502, `Model server ${where} failed while generating.`, "server_error", "upstream_error");
}

/** `DISPATCH_FIRST_SYNC=0`: no Call.ready(), the first chunk goes through next() like the rest. */
const readyOn = process.env.DISPATCH_FIRST_SYNC !== "0";

export function createDispatchBackend(o: DispatchBackendOptions): DispatchBackend {
  const client = o.client ?? createModelClient({ url: o.url, protocol: o.protocol, connectTimeoutMs: o.connectTimeoutMs });
  let profile: ModelProfile | undefined;
  let lastOk = false;

  return {
    id: o.id,
    kind: "dispatch",
    url: o.url,
    client,
    models: () => (profile ? [profile.modelId] : []),
    profile: (model) => (profile?.modelId === model ? profile : undefined),
    async probe(signal) {
      try {
        const h = await client.health(signal);
        if (!h.serving) throw serviceUnavailable(`not serving${h.message ? `: ${h.message}` : ""}`);
        if (!profile || !lastOk) profile = getModelProfile(await client.modelInfo(signal));
        lastOk = true;
      } catch (err) {
        lastOk = false;
        throw err;
      }
    },
    async open(job: Job): Promise<Call> {
      const prompts = job.batch ?? [job.prepared];
      const n = job.req.n;
      if (prompts.length === 1 && n === 1) return openChoice(job, job.prepared, 0, 0, true);
      // n choices of each prompt, n sequences per prompt on this server. Each prompt's choice 0 first: once its first
      // token is out its prompt's full blocks are in the prefix cache, so the prompt's other choices start from them
      // instead of computing it n times over. Every choice has its first output before the response starts, so a
      // refusal is still a clean error the gateway may retry elsewhere. Choice index = prompt index x n + choice.
      type Choice = { prepared: PreparedPrompt | undefined; index: number; choice: number };
      const all: Choice[] = prompts.flatMap((prepared, i) => Array.from({ length: n }, (_, choice) => ({ prepared, index: i * n + choice, choice })));
      const open = (list: Choice[]) => Promise.allSettled(list.map((c) => openChoice(job, c.prepared, c.index, c.choice, false)));
      const [first, others] = [all.filter((c) => c.choice === 0), all.filter((c) => c.choice > 0)];
      const firsts = await open(first);
      const rest = firsts.every((r) => r.status === "fulfilled") ? await open(others) : [];
      const settled = [...firsts, ...rest];
      const calls = settled.flatMap((r) => (r.status === "fulfilled" ? [r.value] : []));
      const failed = settled.find((r) => r.status === "rejected");
      if (failed) {
        for (const c of calls) c.close();
        throw failed.reason;
      }
      const ordered: Call[] = [];
      [...first, ...others].forEach((c, k) => (ordered[c.index] = calls[k]!));
      return mergeChoiceCalls(ordered, {
        endpoint: job.req.endpoint,
        stream: job.req.stream,
        ctx: { id: job.id, created: job.created, model: job.req.model, includeUsage: job.req.includeUsage },
        promptCalls: prompts.map((_, i) => i * n),
      });
    },
  };

  /**
   * One choice of the job: its own Generate call for `prepared` (the job's prompt, or one of its batch), its frames
   * under `index`, seeded seed + `choice`; `terminal` false: its stream ends without usage and [DONE].
   */
  async function openChoice(job: Job, prepared: PreparedPrompt | undefined, index: number, choice: number, terminal: boolean): Promise<Call> {
    const { req } = job;
    if (!profile || !prepared) throw serviceUnavailable(`Model server ${o.id} has not reported its model yet.`);
    if (req.passthroughOnly.length > 0) {
      const p = req.passthroughOnly[0]!;
      throw badRequest(`'${p}' is not supported by model '${req.model}'.`, p, "unsupported_parameter");
    }
    const seed = req.sampling.seed;
    // a reasoning model answers its <think> block before a JSON-mode object, unless the prompt turned thinking off
    const reasons = req.endpoint === "chat" && profile.reasoning && o.reasoning !== false;
    const thinking = !reasons ? undefined : prepared.opensReasoning ? "inside" : prepared.closesReasoning ? undefined : "may";
    const steps = client
      .generate(
        {
          // index > 0: its own id (the server keys sequences by it); choice j > 0 of a prompt: seed + j, so seeded
          // choices differ
          requestId: index === 0 ? job.id : `${job.id}.${index}`,
          model: req.model,
          promptTokenIds: prepared.tokenIds,
          temperature: req.sampling.temperature,
          topP: req.sampling.topP,
          topK: req.sampling.topK,
          seed: seed === undefined || choice === 0 ? seed : (seed + choice) % 2 ** 53,
          frequencyPenalty: req.sampling.frequencyPenalty,
          presencePenalty: req.sampling.presencePenalty,
          logitBias: req.sampling.logitBias,
          maxTokens: req.maxTokens,
          minTokens: req.minTokens,
          stopTokenIds: req.stopTokenIds,
          ignoreEos: req.ignoreEos,
          topLogprobs: req.logprobs?.top,
          ...responseFormat(req, profile, thinking),
          priority: req.priority,
        },
        job.signal,
        job.traceHeaders,
      )
      [Symbol.asyncIterator]();
    // The first next() sends the call (the generators run up to fetch at once); what the first
    // output needs is built while it travels, not after it answers.
    const firstStep = steps.next();
    const tokenizer = profile.tokenizer;
    const renderer = createTokenStreamRenderer({
      endpoint: req.endpoint,
      stream: req.stream,
      ctx: { id: job.id, created: job.created, model: req.model, includeUsage: req.includeUsage, index },
      assembler: createTextAssembler(
        createUtf8Detokenizer((id) => tokenizer.tokenBytes(id)),
        createStopMatcher(req.stop),
      ),
      promptTokens: prepared.tokenIds.length,
      logprobs: req.logprobs ? createLogprobFormatter(req.endpoint, (id) => tokenizer.tokenBytes(id)) : undefined,
      terminal,
      echo: req.echo ? echoText(req, prepared, tokenizer) : undefined,
      // tools reach here only on a model whose template announces tool calls (ModelProfile.prepare refuses others)
      toolCalls: req.tools && profile.toolCalls ? { parallel: req.parallelToolCalls !== false } : undefined,
      reasoning: reasons ? { startInside: prepared.opensReasoning === true } : undefined,
    });
    const stats: CallStats = { promptTokens: prepared.tokenIds.length, completionTokens: 0, finishReason: null };
    const first = await firstStep;
    ttftMark("first-step");
    let pending: IteratorResult<GenerateStep> | null = first;
    let closed = false;
    const close = () => {
      if (closed) return;
      closed = true;
      void steps.return?.();
    };

    /** Feed one step to the renderer; throws on engine failures. */
    function render(step: GenerateStep): string {
      const f = step.finish;
      if (f !== null && f !== "stop" && f !== "length") throw engineError(f, o.id);
      const out = renderer.step(step.tokenIds, f, step.usage, step.logprobs);
      stats.completionTokens += step.tokenIds.length;
      if (renderer.done) {
        stats.finishReason = renderer.finishReason;
        if (renderer.usage) {
          stats.completionTokens = renderer.usage.completion_tokens;
          stats.cachedPromptTokens = renderer.usage.prompt_tokens_details?.cached_tokens;
          stats.reasoningTokens = renderer.usage.completion_tokens_details?.reasoning_tokens;
        }
      }
      return out;
    }

    async function nextStep(): Promise<IteratorResult<GenerateStep>> {
      if (pending) {
        const p = pending;
        pending = null;
        return p;
      }
      return steps.next();
    }

    return {
      backendId: o.id,
      stats,
      close,
      // One turn of next()'s loop on the step already in hand.
      ready: readyOn
        ? () => {
            const r = pending;
            if (!r || renderer.done) return undefined;
            pending = null;
            if (r.done) throw new GatewayError(502, `Model server ${o.id} ended the stream without a finish reason.`, "server_error", "upstream_error");
            const out = render(r.value);
            if (renderer.done) close(); // a stop string hit: free the sequence now
            return out;
          }
        : undefined,
      async next() {
        while (!renderer.done) {
          const r = await nextStep();
          if (r.done) throw new GatewayError(502, `Model server ${o.id} ended the stream without a finish reason.`, "server_error", "upstream_error");
          const out = render(r.value);
          if (renderer.done) close(); // a stop string hit: free the sequence now
          if (out !== "") return out;
        }
        close();
        return null;
      },
    };
  }
}

