/**
 * Continuous-batching scheduler: decides, for every engine step, which
 * sequences run and how many of their tokens. Pure bookkeeping over the block
 * manager; no timers, no tensors.
 *
 * The rule, per step, under a budget of `maxBatchTokens` tokens:
 * 1. Running sequences that decode go first (one token each, or 1 + k when
 *    they carry k proposed tokens to verify): decode latency never waits
 *    behind a long prompt.
 * 2. Running sequences still prefilling continue, oldest first, each taking
 *    as many of its remaining prompt tokens as the budget leaves (chunked prefill).
 * 3. Waiting sequences are admitted in order of priority (lower first; vLLM's
 *    `priority`), oldest first within one, while the budget, a batch slot
 *    (`maxNumSeqs`) and KV blocks allow. Admission reuses the longest cached
 *    prefix (whole blocks; never the block holding the last prompt token, so
 *    a sequence never writes into a shared block). New sequences join the
 *    running batch every step.
 * A step's token budget is shared: decodes take one token per sequence, so with
 * `maxBatchTokens > maxNumSeqs` every step leaves room for prefill work, and
 * waiting work is never starved by running work nor the reverse.
 *
 * When a running sequence needs a block and none is free, a running sequence
 * not yet in this step is preempted, the one of the lowest priority (highest
 * value), the most recently admitted among those: its blocks are released (full
 * ones stay in the prefix cache) and it goes back to the front of its priority
 * in the waiting queue to be recomputed. If no other sequence can give way it
 * preempts itself. Because the engine caps every sequence at the KV capacity,
 * a sequence alone always fits: this never deadlocks and never crashes.
 *
 * With KV pools (block-manager.ts: a sequence's blocks all come from one pool),
 * only sequences of the same pool are preempted for it (the engine caps every
 * sequence at the smallest pool), and a waiting sequence whose cached prefix
 * sits in a pool without room is admitted without it into the roomiest pool.
 *
 * @example
 * const s = createScheduler({ blockManager, maxNumSeqs: 32, maxBatchTokens: 512, rootHash });
 * s.add(seq);
 * const plan = s.schedule();         // chunks to run this step
 * // ... run the model, sample ...
 * s.commit(seq, plan.chunks[0].start + plan.chunks[0].tokens.length);
 */
import type { BlockManager } from "./block-manager";
import { ensureHashes, type Sequence } from "./sequence";

export interface SchedulerOptions {
  blockManager: BlockManager;
  /** Most sequences in one step's batch. */
  maxNumSeqs: number;
  /** Most tokens (prefill + decode + verify) in one step. */
  maxBatchTokens: number;
  /** Root of the chained block hashes (salted with the model id). */
  rootHash: bigint;
}

/** One sequence's work in a step. */
export interface ScheduledChunk {
  seq: Sequence;
  /** Absolute position of tokens[0]. */
  start: number;
  tokens: number[];
  /** Logits wanted for the trailing positions: 0 (mid-prefill), 1, or 1 + draft length. */
  numLogits: number;
  /** How many of `tokens` are proposed (speculative) tokens at the end. */
  numDraft: number;
}

export interface SchedulePlan {
  chunks: ScheduledChunk[];
  /** Sequences moved back to waiting this step. */
  preempted: Sequence[];
  prefillTokens: number;
  decodeSeqs: number;
}

export interface Scheduler {
  add(seq: Sequence): void;
  /** Put a sequence first in line among its priority (an imported or preempted sequence). */
  addFirst(seq: Sequence): void;
  schedule(): SchedulePlan;
  /**
   * After the step: positions [0, numComputed) now hold valid KV. Registers
   * newly full blocks in the prefix cache and frees blocks past the valid KV
   * (a rejected speculative tail), but none below `reserved` (positions a step
   * already in flight writes: engine lookahead).
   */
  commit(seq: Sequence, numComputed: number, reserved?: number): void;
  /** Remove the sequence wherever it is and release its blocks at once. */
  finish(seq: Sequence): void;
  readonly waiting: readonly Sequence[];
  readonly running: readonly Sequence[];
  /** Prompt (or recompute) tokens still to prefill, running and waiting. */
  queuedPrefillTokens(): number;
  hasWork(): boolean;
}

export function createScheduler(opts: SchedulerOptions): Scheduler {
  const bm = opts.blockManager;
  const B = bm.blockSize;
  if (opts.maxNumSeqs < 1) throw new RangeError(`maxNumSeqs must be >= 1, got ${opts.maxNumSeqs}`);
  if (opts.maxBatchTokens < 1) throw new RangeError(`maxBatchTokens must be >= 1, got ${opts.maxBatchTokens}`);
  const waiting: Sequence[] = [];
  const running: Sequence[] = [];

  const blocksFor = (positions: number) => Math.ceil(positions / B);
  /** Into the waiting queue by priority: after its equals (`first` false) or before them (a preempted sequence). */
  const enqueue = (seq: Sequence, first: boolean) => {
    let i = waiting.length;
    while (i > 0 && (first ? waiting[i - 1]!.priority >= seq.priority : waiting[i - 1]!.priority > seq.priority)) i--;
    waiting.splice(i, 0, seq);
  };

  function preempt(seq: Sequence): void {
    bm.release(seq.blockTable);
    seq.numComputed = 0;
    seq.numRegistered = 0;
    seq.draft = [];
    seq.status = "waiting";
    seq.preemptions++;
    const i = running.indexOf(seq);
    if (i >= 0) running.splice(i, 1);
    enqueue(seq, true);
  }

  function schedule(): SchedulePlan {
    const chunks: ScheduledChunk[] = [];
    const preempted: Sequence[] = [];
    const inStep = new Set<Sequence>();
    let budget = opts.maxBatchTokens;
    let prefillTokens = 0;
    let decodeSeqs = 0;

    /** Make room for `fresh` more blocks for `seq`; false when `seq` itself had to give way. */
    function makeRoom(seq: Sequence, fresh: number): boolean {
      // Only a sequence of the same KV pool frees room for this one.
      const pool = bm.poolOf(seq.blockTable);
      while (!bm.canAllocate(seq.blockTable, seq.blockHashes, 0, fresh)) {
        // the lowest priority (highest value) gives way; among equals, the most recently admitted
        let victim: Sequence | undefined;
        for (let i = running.length - 1; i >= 0; i--) {
          const r = running[i]!;
          if (r !== seq && !inStep.has(r) && (pool < 0 || bm.poolOf(r.blockTable) === pool) && (!victim || r.priority > victim.priority)) victim = r;
        }
        // nobody else may give way, or only sequences that come before this one: this one does
        if (!victim || victim.priority < seq.priority) {
          preempt(seq);
          preempted.push(seq);
          return false;
        }
        preempt(victim);
        preempted.push(victim);
      }
      return true;
    }

    const decoding = (s: Sequence) => s.tokens.length - s.numComputed === 1;
    // Pass 1 and 2: running decodes, then running prefills. Iterate over a copy:
    // preemption removes sequences from `running`.
    const order = [...running.filter(decoding), ...running.filter((s) => !decoding(s))];
    for (const seq of order) {
      if (seq.status !== "running" || budget <= 0) continue;
      const pending = seq.tokens.length - seq.numComputed;
      let tokens: number[];
      let numDraft = 0;
      if (pending === 1) {
        numDraft = seq.draft.length > 0 && budget >= 1 + seq.draft.length ? seq.draft.length : 0;
        tokens = [seq.tokens[seq.numComputed]!, ...seq.draft.slice(0, numDraft)];
      } else {
        tokens = seq.tokens.slice(seq.numComputed, seq.numComputed + Math.min(pending, budget));
      }
      const fresh = Math.max(0, blocksFor(seq.numComputed + tokens.length) - seq.blockTable.length);
      if (fresh > 0 && !makeRoom(seq, fresh)) continue;
      bm.allocate(seq.blockTable, seq.blockHashes, 0, fresh);
      const done = seq.numComputed + tokens.length === seq.tokens.length + numDraft;
      chunks.push({ seq, start: seq.numComputed, tokens, numLogits: done ? 1 + numDraft : 0, numDraft });
      inStep.add(seq);
      budget -= tokens.length;
      if (pending === 1) decodeSeqs++;
      else prefillTokens += tokens.length;
    }

    // Pass 3: admit waiting sequences, oldest (or preempted) first.
    while (waiting.length > 0 && budget > 0 && running.length < opts.maxNumSeqs) {
      const seq = waiting[0]!;
      if (preempted.includes(seq)) break; // not twice in one step
      const len = seq.tokens.length;
      let start = seq.numComputed;
      let hits = 0;
      if (seq.blockTable.length === 0) {
        // Reuse whole cached blocks, but never the one holding the last token:
        // its logits are needed, and a shared block is never written.
        const maxHit = Math.floor((len - 1) / B);
        ensureHashes(seq, maxHit, B, opts.rootHash);
        hits = bm.matchPrefix(seq.blockHashes, maxHit);
        start = hits * B;
      } // else: KV imported from elsewhere; it resumes at numComputed.
      let count = Math.min(len - start, budget);
      let fresh = Math.max(0, blocksFor(start + count) - (seq.blockTable.length || hits));
      if (!bm.allocate(seq.blockTable, seq.blockHashes, hits, fresh)) {
        // Pools: the prefix's pool is full; recompute the prefix in another pool rather than wait.
        if (bm.pools === 1 || hits === 0) break;
        hits = 0;
        start = 0;
        count = Math.min(len, budget);
        fresh = blocksFor(count);
        if (!bm.allocate(seq.blockTable, seq.blockHashes, 0, fresh)) break;
      }
      waiting.shift();
      seq.numComputed = start;
      if (hits > 0) seq.numRegistered = hits;
      if (seq.preemptions === 0 && seq.firstScheduledMs === 0) seq.cachedPromptTokens = Math.min(start, seq.promptLen);
      seq.status = "running";
      running.push(seq);
      const tokens = seq.tokens.slice(start, start + count);
      chunks.push({ seq, start, tokens, numLogits: start + count === len ? 1 : 0, numDraft: 0 });
      inStep.add(seq);
      budget -= count;
      if (len - start === 1) decodeSeqs++;
      else prefillTokens += count;
    }
    return { chunks, preempted, prefillTokens, decodeSeqs };
  }

  return {
    waiting,
    running,
    add(seq) {
      seq.status = "waiting";
      enqueue(seq, false);
    },
    addFirst(seq) {
      seq.status = "waiting";
      enqueue(seq, true);
    },
    schedule,
    commit(seq, numComputed, reserved = numComputed) {
      if (seq.status !== "running") return;
      seq.numComputed = numComputed;
      bm.truncate(seq.blockTable, blocksFor(Math.max(numComputed, reserved)));
      const full = Math.floor(numComputed / B);
      if (full > seq.numRegistered) {
        ensureHashes(seq, full, B, opts.rootHash);
        bm.register(seq.blockTable, seq.blockHashes, seq.numRegistered, full);
        seq.numRegistered = full;
      }
    },
    finish(seq) {
      bm.release(seq.blockTable);
      seq.status = "finished";
      let i = running.indexOf(seq);
      if (i >= 0) running.splice(i, 1);
      i = waiting.indexOf(seq);
      if (i >= 0) waiting.splice(i, 1);
    },
    queuedPrefillTokens() {
      let n = 0;
      for (const s of running) {
        const pending = s.tokens.length - s.numComputed;
        if (pending > 1) n += pending;
      }
      // A waiting prompt costs only what its cached prefix does not cover
      // (the router compares servers by this; counting cached tokens would
      // make the server holding a prefix look busier than it is).
      for (const s of waiting) {
        const len = s.tokens.length;
        if (s.blockTable.length > 0) {
          n += len - s.numComputed;
          continue;
        }
        const maxHit = Math.floor((len - 1) / B);
        ensureHashes(s, maxHit, B, opts.rootHash);
        n += len - bm.matchPrefix(s.blockHashes, maxHit) * B;
      }
      return n;
    },
    hasWork() {
      return running.length > 0 || waiting.length > 0;
    },
  };
}
