/**
 * The engine loop: the I/O edge around the pure cores. It admits requests
 * (admission control), runs scheduler steps through the model runner, samples,
 * streams each sequence's tokens and text deltas to its consumer, handles
 * cancellation and deadlines, and publishes KV events and load.
 *
 * One step at a time: schedule -> runner.forward (or forwardSampled, when the
 * runner samples on the device and every row allows it: gpu-sampling.ts) ->
 * accept tokens -> commit KV -> publish. On a runner that chains sampled steps
 * (CUDA), a steady decode batch runs one step ahead: the next decode step is
 * launched before the one in flight returns, its tokens read on the GPU
 * (lookahead.ts), so the host's work between steps overlaps the device. Between steps the loop yields to the event loop so RPC I/O
 * (new requests, cancellations, watchers) is served. A cancellation frees the
 * sequence's blocks at once, or, when the sequence is inside the step being
 * computed (its blocks are being written), as soon as that step returns. A step
 * that does not return within `stepTimeoutMs` (a stuck device) stops the engine:
 * live sequences end with "error", new work is refused, `onStalled` is told.
 *
 * @example
 * const engine = createEngine({ runner, blockSize: 16, numKvBlocks: 1024, maxNumSeqs: 32,
 *   maxBatchTokens: 512, maxQueue: 256, serverId: "ms-1", tokenBytes });
 * const stream = engine.generate({ promptTokenIds: [1, 2, 3], stop: { maxTokens: 8 } });
 * for await (const out of stream) console.log(out.tokenIds, out.textDelta, out.finishReason);
 */
import { rootHash } from "@dispatch/common/src/block-hash";
import { acceptSampled, acceptStep, bannedTokens, hasSelectableLogit, type AcceptResult } from "./accept";
import { importKvInto } from "./import-kv";
import { createAsyncQueue, type AsyncQueue } from "./async-queue";
import { createBlockManager, type BlockManager } from "./block-manager";
import { createDetokenizer, type Detokenizer } from "./detokenizer";
import { EngineError } from "./errors";
import { planDeviceSampling, sampledForward, samplingExtras, type GpuSampling, type SampledRows } from "./gpu-sampling";
import { createKvFeed } from "./kv-feed";
import { createLoadTracker } from "./load-tracker";
import { planLookahead, reserveLookaheadBlocks } from "./lookahead";
import { createJsonVocab, type JsonVocab } from "./json-constraint";
import { compileSchema, SchemaError, type SchemaNode } from "./json-schema";
import { proposeNgram } from "./ngram-proposer";
import { createScheduler, type SchedulePlan, type ScheduledChunk, type Scheduler } from "./scheduler";
import { validateRequest, type GenerateOutput, type SequenceObserver } from "./request";
import { counterUniform } from "./rng";
import { createSequence, numGenerated, type FinishReason, type Sequence } from "./sequence";

export type { GenerateOutput, GenerateParams, GenerateStream, SequenceObserver, Usage } from "./request";
export type { Engine, EngineOptions, StepStats } from "./engine-api";
import type { Engine, EngineOptions } from "./engine-api";

const STALLED: unique symbol = Symbol("stalled");

interface Live {
  seq: Sequence;
  queue: AsyncQueue<GenerateOutput>;
  detok: Detokenizer | null;
  topLogprobs: number;
  sentFirst: boolean;
  observer: SequenceObserver | undefined;
}

/** A stream message held back until the next step is launched, or the close of a stream. */
interface Outgoing {
  l: Live;
  out: GenerateOutput | null;
  close: boolean;
  tokens: number;
  finished: { outputTokens: number; reason: FinishReason } | null;
}

/** A launched step: its plan, device sampling and the runner's promise. */
interface Flight {
  plan: SchedulePlan;
  device: GpuSampling[] | null;
  pending: Promise<SampledRows[] | Float32Array[]> | null;
  failure: unknown;
  lookahead: boolean;
  /** performance.now() at launch, and the host phases before it (ms). */
  t0: number;
  scheduleMs: number;
  buildMs: number;
  launchMs: number;
}

/** A request's JSON schema, compiled (json-schema.ts); what it cannot take is invalid_argument. */
function schemaOf(schema: unknown): SchemaNode {
  try {
    return compileSchema(schema);
  } catch (e) {
    if (e instanceof SchemaError) throw new EngineError("invalid_argument", `response_format json_schema: ${e.message}`);
    throw e;
  }
}

export function createEngine(opts: EngineOptions): Engine {
  const { runner } = opts;
  const spec = runner.spec;
  const B = opts.blockSize;
  // A data-parallel runner keeps each sequence's KV on one rank: one block pool per rank (block-manager.ts).
  const kvPools = (runner as { kvPools?: unknown }).kvPools;
  const pools = typeof kvPools === "number" && kvPools > 1 ? kvPools : 1;
  const maxLen = Math.min(spec.maxContext, opts.maxContext ?? Number.POSITIVE_INFINITY, Math.floor(opts.numKvBlocks / pools) * B);
  const bm: BlockManager = createBlockManager({ numBlocks: opts.numKvBlocks, blockSize: B, pools });
  const scheduler: Scheduler = createScheduler({
    blockManager: bm,
    maxNumSeqs: opts.maxNumSeqs,
    maxBatchTokens: opts.maxBatchTokens,
    rootHash: rootHash(spec.modelId),
  });
  runner.allocateKv(opts.numKvBlocks, B);
  const forwardSampled = sampledForward(runner);
  // Decode steps overlapped with the host (lookahead.ts): the runner chains sampled steps on the device. Speculative
  // decoding keeps one step at a time (its proposals need the tokens).
  const chains = opts.lookahead !== false && forwardSampled !== null && (runner as { chainsSampled?: boolean }).chainsSampled === true && (opts.specTokens ?? 0) === 0;
  let ahead: Flight | null = null;
  // Per sequence in the step launched ahead: the position after the one it writes. Committing the step before it
  // keeps the blocks up to there (commit would free a block allocated for that position).
  const aheadEnd = new Map<Sequence, number>();
  let lastReturn = 0;
  const kvFeed = createKvFeed({ snapshot: () => bm.snapshot() });
  const tracker = createLoadTracker();
  const live = new Map<number, Live>();
  const byRequestId = new Map<string, Live>();
  const listeners = new Set<() => void>();
  const inStep = new Set<Sequence>();
  const cancelAfterStep = new Set<Sequence>();
  let nextId = 1;
  let jsonVocab: JsonVocab | undefined;
  let looping = false;
  let closed = false;
  let draining = false;
  let stalled: string | null = null; // why the engine stopped serving: a step that never returned
  let wakeLoop: (() => void) | null = null;
  // Outputs of a step are held here and handed to the streams right after the next step is
  // launched, so the streams' work (protobuf, RPC writes: milliseconds at batch 64) runs while
  // the device computes instead of between steps. Only on runners whose step runs off this
  // thread (CUDA): a runner computing inside forward() would delay every output by a step.
  const overlapEmit = runner.backend === "cuda";
  let holding = false;
  let outbox: Outgoing[] = [];

  /** Hand a message (and/or the close) to a stream now, or queue it behind held ones. */
  function send(o: Outgoing): void {
    if (holding || outbox.length > 0) outbox.push(o);
    else deliver(o);
  }

  function deliver(o: Outgoing): void {
    if (o.out) o.l.queue.push(o.out);
    if (o.close) o.l.queue.close();
    if (o.tokens > 0) o.l.observer?.tokens?.(o.tokens);
    if (o.finished) o.l.observer?.finished?.(o.finished);
  }

  function flushOutbox(): void {
    holding = false;
    if (outbox.length === 0) return;
    const list = outbox;
    outbox = [];
    for (const o of list) {
      try {
        deliver(o);
      } catch (e) {
        // An observer's failure must not cost the other streams their messages.
        console.error(`[engine] delivering output for ${o.l.seq.requestId} failed:`, e);
      }
    }
  }

  const notify = () => {
    for (const l of listeners) l();
  };

  /** End the sequence: free its blocks now, send the last message (with any final tokens) and close its stream. */
  function finish(l: Live, reason: FinishReason, last?: Pick<GenerateOutput, "tokenIds" | "textDelta" | "logprobs">): void {
    const seq = l.seq;
    if (seq.status === "finished") return;
    scheduler.finish(seq);
    seq.finishReason = reason;
    live.delete(seq.id);
    if (byRequestId.get(seq.requestId) === l) byRequestId.delete(seq.requestId);
    const tail = l.detok ? l.detok.flush() : "";
    send({
      l,
      out: {
        tokenIds: last?.tokenIds ?? [],
        textDelta: (last?.textDelta ?? "") + tail,
        logprobs: last?.logprobs ?? [],
        finishReason: reason,
        usage: { promptTokens: seq.promptLen, completionTokens: seq.tokens.length - seq.promptLen, cachedPromptTokens: seq.cachedPromptTokens },
        ...firstFields(l),
      },
      close: true,
      tokens: last?.tokenIds.length ?? 0,
      finished: { outputTokens: seq.tokens.length - seq.promptLen, reason },
    });
    notify();
  }

  function firstFields(l: Live): { queueTimeMs?: number } {
    if (l.sentFirst) return {};
    l.sentFirst = true;
    const started = l.seq.firstScheduledMs || Date.now();
    return { queueTimeMs: Math.max(0, started - l.seq.arrivalMs) };
  }

  function cancel(seq: Sequence): void {
    const l = live.get(seq.id);
    if (!l) return;
    if (inStep.has(seq)) cancelAfterStep.add(seq);
    else finish(l, "cancelled");
  }

  function expireDeadlines(now: number): void {
    for (const l of [...live.values()]) {
      if (l.seq.deadlineMs > 0 && now >= l.seq.deadlineMs && !inStep.has(l.seq)) finish(l, "deadline");
    }
  }

  function emitStep(l: Live, chunk: ScheduledChunk, logits: Float32Array): void {
    for (let j = 0; j < chunk.numLogits; j++) {
      if (!hasSelectableLogit(logits.subarray(j * spec.vocabSize, (j + 1) * spec.vocabSize))) return failNumerically(l);
    }
    emit(l, acceptStep(l.seq, chunk, logits, spec.vocabSize, { eosTokenIds: spec.eosTokenIds, maxLen, topLogprobs: l.topLogprobs }));
  }

  function emitSampled(l: Live, chunk: ScheduledChunk, rows: SampledRows): void {
    if (rows.ids.some((id) => id < 0)) return failNumerically(l); // the device sampler found no finite logit
    emit(l, acceptSampled(l.seq, chunk, rows.ids, rows.logprobs, { eosTokenIds: spec.eosTokenIds, maxLen }, rows.top));
  }

  // Logits with no number above -Infinity (NaN or -inf everywhere) mean the model failed numerically for this
  // sequence: it ends with an error instead of a made-up token; the rest of the step goes on.
  function failNumerically(l: Live): void {
    console.error(`[engine] ${l.seq.requestId}: the model returned no finite logit (NaN or -inf); ending it with an error`);
    finish(l, "error");
  }

  function emit(l: Live, r: AcceptResult): void {
    const seq = l.seq;
    scheduler.commit(seq, r.validKv, aheadEnd.get(seq));
    // The token that ends a sequence on a stop condition carries no text (as EOS is never shown).
    const textTokens = r.finish === "stop" ? r.tokens.slice(0, -1) : r.tokens;
    const text = l.detok ? l.detok.push(textTokens) : "";
    if (r.finish) {
      finish(l, r.finish, { tokenIds: r.tokens, textDelta: text, logprobs: r.logprobs });
      return;
    }
    send({ l, out: { tokenIds: r.tokens, textDelta: text, logprobs: r.logprobs, finishReason: null, ...firstFields(l) }, close: false, tokens: r.tokens.length, finished: null });
  }

  function propose(): void {
    const k = opts.specTokens ?? 0;
    if (k <= 0) return;
    for (const seq of scheduler.running) {
      if (seq.tokens.length - seq.numComputed !== 1) continue;
      // Greedy only: whether a step verifies proposals depends on the batch (budget),
      // and verification draws from the sequence's PRNG, so a sampled sequence
      // would lose "same seed, same output whatever the batch".
      if (seq.sampling.temperature > 0 || seq.constraint) continue;
      const room = Math.min(seq.stop.maxTokens - (seq.tokens.length - seq.promptLen) - 1, maxLen - seq.tokens.length);
      seq.draft = room > 0 ? proposeNgram(seq.tokens, Math.min(k, room)) : [];
    }
  }

  function inputOf(chunks: readonly ScheduledChunk[]) {
    return {
      seqs: chunks.map((c) => ({
        tokens: Int32Array.from(c.tokens),
        startPos: c.start,
        blockTable: Int32Array.from(c.seq.blockTable),
        numLogits: c.numLogits,
      })),
    };
  }

  /** Schedule and launch an ordinary step; null when there is nothing to run. */
  function launchScheduled(): Flight | null {
    const h0 = performance.now();
    expireDeadlines(Date.now());
    propose();
    const plan = scheduler.schedule();
    kvFeed.publish(bm.drainEvents());
    if (plan.chunks.length === 0) return null;
    const now = Date.now();
    for (const c of plan.chunks) {
      if (c.seq.firstScheduledMs === 0) {
        c.seq.firstScheduledMs = now;
        live.get(c.seq.id)?.observer?.admitted?.({ cachedTokens: c.seq.cachedPromptTokens, batchSize: plan.chunks.length, queueMs: now - c.seq.arrivalMs });
      }
      inStep.add(c.seq);
    }
    const h1 = performance.now();
    const input = inputOf(plan.chunks);
    const device = forwardSampled
      ? planDeviceSampling(plan.chunks, (c) => ({ topLogprobs: live.get(c.seq.id)?.topLogprobs ?? 0, banned: bannedTokens(c.seq, spec.eosTokenIds) }), samplingExtras(runner))
      : null;
    const t0 = performance.now();
    const f: Flight = { plan, device, pending: null, failure: null, lookahead: false, t0, scheduleMs: h1 - h0, buildMs: t0 - h1, launchMs: 0 };
    try {
      f.pending = forwardSampled && device ? forwardSampled(input, device) : runner.forward(input);
    } catch (e) {
      f.failure = e;
    }
    f.launchMs = performance.now() - t0;
    return f;
  }

  /**
   * Launch the decode step after `cur` before `cur` returns (lookahead.ts), its blocks allocated here; null when
   * it cannot be planned or its blocks are not free (the next ordinary step makes room or preempts).
   */
  function launchLookahead(cur: Flight): Flight | null {
    if (!chains || cur.failure || !cur.pending) return null;
    const h0 = performance.now();
    const freeSlot = scheduler.running.length < opts.maxNumSeqs;
    const la = planLookahead({
      chunks: cur.plan.chunks,
      sampling: cur.device,
      running: scheduler.running,
      canAdmit: freeSlot && scheduler.waiting.length > 0,
      maxLen,
      eosTokenIds: spec.eosTokenIds,
      nowMs: Date.now(),
    });
    if (!la) return null;
    const undo = reserveLookaheadBlocks(la.chunks, bm);
    if (!undo) return null;
    const plan: SchedulePlan = { chunks: la.chunks, preempted: [], prefillTokens: 0, decodeSeqs: la.chunks.length };
    const h1 = performance.now();
    const input = inputOf(la.chunks);
    const t0 = performance.now();
    const f: Flight = { plan, device: la.sampling, pending: null, failure: null, lookahead: true, t0, scheduleMs: h1 - h0, buildMs: t0 - h1, launchMs: 0 };
    try {
      f.pending = forwardSampled!(input, la.sampling, la.fromRow);
    } catch (e) {
      // Refused at the call (the runner's rules): undo the blocks and run the next step the ordinary way.
      console.error("[engine] lookahead step refused; continuing one step at a time:", e);
      undo();
      return null;
    }
    f.launchMs = performance.now() - t0;
    for (const c of la.chunks) {
      inStep.add(c.seq);
      aheadEnd.set(c.seq, c.start + 1);
    }
    return f;
  }

  // The step's result, or STALLED once it has not returned within opts.stepTimeoutMs.
  function withinStepTimeout<T>(pending: Promise<T>): Promise<T | typeof STALLED> {
    const ms = opts.stepTimeoutMs ?? 0;
    if (!(ms > 0)) return pending;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const late = new Promise<typeof STALLED>((resolve) => (timer = setTimeout(() => resolve(STALLED), ms)));
    return Promise.race([pending, late]).finally(() => clearTimeout(timer));
  }

  // Ends every live sequence with "error" (a step failed past its own sequences, or never returned) and hands the
  // outputs to the streams.
  function failAllLive(): void {
    inStep.clear();
    cancelAfterStep.clear();
    for (const l of [...live.values()]) {
      try {
        finish(l, "error");
      } catch (e) {
        console.error("[engine] could not finish a sequence cleanly:", e);
        live.delete(l.seq.id);
        l.queue.close();
      }
    }
    flushOutbox();
  }

  // A step never returned: the device is stuck and nothing launched after it will run. Fail every live sequence,
  // refuse new work, drop the step launched ahead (it waits behind the stuck one) and tell the server.
  function stall(): void {
    stalled = `a model step has not returned in ${(opts.stepTimeoutMs ?? 0) / 1000} s: the ${runner.backend === "cuda" ? "GPU" : "model runner"} is stuck; this server stops serving`;
    console.error(`[engine] ${stalled}`);
    closed = true;
    ahead = null;
    aheadEnd.clear();
    failAllLive();
    kvFeed.closeAll();
    notify();
    opts.onStalled?.(stalled);
  }

  async function step(): Promise<void> {
    let cur = ahead;
    ahead = null;
    aheadEnd.clear();
    if (!cur) {
      cur = launchScheduled();
      if (!cur) {
        flushOutbox();
        await new Promise((r) => setTimeout(r, 2));
        return;
      }
    }
    ahead = launchLookahead(cur);
    const h2 = performance.now();
    // The step (and the one after it) is launched: the previous step's outputs go to the streams while it runs.
    flushOutbox();
    const h3 = performance.now();
    const { plan, device } = cur;
    let out: Float32Array[] | null = null;
    let sampled: SampledRows[] | null = null;
    let failure = cur.failure;
    if (cur.pending) {
      try {
        const result = await withinStepTimeout(cur.pending);
        if (result === STALLED) return stall();
        if (forwardSampled && device) sampled = result as SampledRows[];
        else out = result as Float32Array[];
      } catch (e) {
        failure = e;
      }
    }
    const h4 = performance.now();
    const seconds = (h4 - Math.max(cur.t0, lastReturn)) / 1000;
    lastReturn = h4;
    tracker.recordStep(seconds, plan.prefillTokens, plan.decodeSeqs);
    if (overlapEmit) holding = true;
    inStep.clear();
    if (ahead) for (const c of ahead.plan.chunks) inStep.add(c.seq);
    for (let i = 0; i < plan.chunks.length; i++) {
      const c = plan.chunks[i]!;
      c.seq.draft = [];
      const l = live.get(c.seq.id);
      if (!l) continue;
      if (cancelAfterStep.has(c.seq)) {
        finish(l, "cancelled");
        continue;
      }
      if (failure || (!out && !sampled)) {
        console.error(`[engine] step failed for ${c.seq.requestId}:`, failure);
        finish(l, "error");
        continue;
      }
      if (c.numLogits === 0) {
        scheduler.commit(c.seq, c.start + c.tokens.length);
        continue;
      }
      const rows = sampled?.[i];
      if (rows?.logits) emitStep(l, c, rows.logits); // host-sampled inside a device-sampled step
      else if (rows) emitSampled(l, c, rows);
      else emitStep(l, c, out![i]!);
    }
    cancelAfterStep.clear();
    // The step launched ahead carries the tokens this step sampled (read on the GPU): record them in its chunks.
    if (ahead) for (const c of ahead.plan.chunks) if (c.seq.tokens.length > c.start) c.tokens[0] = c.seq.tokens[c.start]!;
    kvFeed.publish(bm.drainEvents());
    notify();
    const hostMs = { schedule: cur.scheduleMs, build: cur.buildMs, launch: cur.launchMs, emit: h3 - h2, accept: performance.now() - h4 };
    opts.onStep?.({ seconds, sequences: plan.chunks.length, tokens: plan.chunks.reduce((n, c) => n + c.tokens.length, 0), prefillTokens: plan.prefillTokens, preempted: plan.preempted.length, deviceSampled: sampled !== null, lookahead: cur.lookahead, hostMs });
  }

  async function loop(): Promise<void> {
    if (looping) return;
    looping = true;
    try {
      while (!closed) {
        if (!scheduler.hasWork() && !ahead) {
          flushOutbox();
          await new Promise<void>((r) => (wakeLoop = r));
          wakeLoop = null;
          continue;
        }
        try {
          await step();
        } catch (e) {
          // A bug in bookkeeping must not take the server down: fail what is live, keep serving.
          console.error("[engine] step failed; failing all live sequences:", e);
          flushOutbox();
          failAllLive();
        }
        // Let RPC I/O run between steps even when forward() computed synchronously.
        await new Promise((r) => setImmediate(r));
      }
      // closed with a step launched ahead: let it finish before the runner may be closed (its results go nowhere)
      if (ahead) {
        const left = ahead;
        ahead = null;
        await left.pending?.catch(() => {});
        inStep.clear();
      }
    } finally {
      looping = false;
    }
  }

  return {
    spec,
    backend: runner.backend,
    serverId: opts.serverId,
    blockSize: B,
    numKvBlocks: opts.numKvBlocks,
    maxLen,
    maxQueue: opts.maxQueue,
    kvFeed,
    generate(p) {
      if (stalled) throw new EngineError("unavailable", stalled);
      if (closed || draining) throw new EngineError("unavailable", "the engine is shutting down");
      validateRequest(p, { maxLen, vocabSize: spec.vocabSize, hasTokenizer: !!opts.tokenBytes });
      const schema = p.responseFormat === "json_schema" ? schemaOf(p.jsonSchema) : undefined;
      // Waiting requests that free batch slots will take at the next step are not queued;
      // the rest are, and at most maxQueue of them.
      const freeSlots = Math.max(0, opts.maxNumSeqs - scheduler.running.length);
      const queued = Math.max(0, scheduler.waiting.length - freeSlots);
      if (queued >= opts.maxQueue) {
        throw new EngineError("resource_exhausted", `queue full: ${queued} requests queued beyond the running batch (max_queue ${opts.maxQueue})`);
      }
      const id = nextId++;
      const requested = p.stop?.maxTokens ?? 0;
      const room = maxLen - p.promptTokenIds.length;
      const seq = createSequence({
        id,
        requestId: p.requestId || `req-${opts.serverId}-${id}`,
        prompt: p.promptTokenIds,
        sampling: p.sampling,
        stop: { ...p.stop, maxTokens: requested > 0 ? Math.min(requested, room) : room },
        deadlineMs: p.deadlineMs ?? 0,
        priority: p.priority,
      });
      if (p.responseFormat === "json_object" || p.responseFormat === "json_schema") {
        // built on the first JSON request (a pass over the vocabulary), then shared
        jsonVocab ??= createJsonVocab(spec.vocabSize, opts.tokenBytes!, [...spec.eosTokenIds, ...(opts.specialTokenIds ?? [])], opts.onJsonMask);
        seq.constraint = jsonVocab.constraint(schema, { prefix: p.jsonPrefix, suffix: p.jsonSuffix, thinking: p.jsonThinking });
      }
      // On a device-sampling runner, host-sampled steps draw the device's u for (seed, token index).
      if (forwardSampled) seq.rng = { next: () => counterUniform(seq.gpuSeed, numGenerated(seq)) };
      if (p.importedKv) importKvInto(seq, p.importedKv, { bm, runner, blockSize: B });
      const queue = createAsyncQueue<GenerateOutput>();
      const l: Live = { seq, queue, detok: p.returnText ? createDetokenizer(opts.tokenBytes!) : null, topLogprobs: p.topLogprobs ?? 0, sentFirst: false, observer: p.observer };
      live.set(id, l);
      byRequestId.set(seq.requestId, l);
      scheduler.add(seq);
      notify();
      wakeLoop?.();
      // Started on a microtask, not here: an async function runs until its first await, so a
      // loop started inside generate() would admit this sequence and call its observer's hooks
      // before the caller has the stream (the server's first request went uncounted).
      queueMicrotask(() => void loop());
      return { requestId: seq.requestId, cancel: () => cancel(seq), [Symbol.asyncIterator]: () => queue[Symbol.asyncIterator]() };
    },
    load() {
      const st = bm.stats();
      return tracker.snapshot({
        running: scheduler.running.length,
        waiting: scheduler.waiting.length,
        queuedPrefillTokens: scheduler.queuedPrefillTokens(),
        kvBlocksUsed: st.used,
        kvBlocksTotal: st.total,
        kvBlocksCached: st.cached,
        maxQueue: opts.maxQueue,
      });
    },
    onLoadChange(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    exportKv(requestId) {
      const l = byRequestId.get(requestId);
      if (!l || l.seq.numComputed === 0) throw new EngineError("not_found", `no computed KV for request ${requestId}`);
      const n = l.seq.numComputed;
      const blocks = Int32Array.from(l.seq.blockTable.slice(0, Math.ceil(n / B)));
      return { tokenIds: l.seq.tokens.slice(0, n), kv: runner.exportKv(blocks) };
    },
    async drain(timeoutMs) {
      draining = true;
      const deadline = performance.now() + timeoutMs;
      while (live.size > 0 && performance.now() < deadline) await new Promise((r) => setTimeout(r, 10));
      const left = live.size;
      await this.close();
      return left;
    },
    async close() {
      closed = true;
      flushOutbox();
      for (const l of [...live.values()]) finish(l, "cancelled");
      kvFeed.closeAll();
      wakeLoop?.();
    },
  };

}
