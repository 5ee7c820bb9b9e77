/**
 * A simulated model server: continuous batching with chunked prefill over a
 * paged KV cache with prefix reuse and LRU eviction, in virtual time.
 *
 * One engine iteration takes
 *   stepBaseMs + stepPerSeqMs * (sequences decoding) + prefillMsPerToken * (prefill tokens this iteration)
 * with a token budget of `chunkTokens` per iteration: one token per decoding
 * sequence, then running prefills first come first served, then new
 * admissions (the shape of dispatch's own engine and of vLLM's chunked
 * prefill). A request is admitted (FCFS, head of line) while budget and batch
 * slots remain and its blocks fit: ceil((prompt + output) / blockSize) minus
 * the cached prefix blocks it reuses, evicting unreferenced cached blocks
 * least-recently-used first. The block holding the last prompt token is never
 * reused (its logits are needed). Prompt blocks become reusable as soon as a
 * chunk has computed them, output blocks when the sequence finishes; a
 * finished sequence's blocks stay cached until evicted. A request's cache
 * hit is measured at admission: the truth the token-weighted hit rate is
 * computed from.
 *
 * It emits exactly what a dispatch model server publishes: KV events
 * (stored / evicted hashes) and load reports.
 */
import { mapFront } from "@dispatch/common/src/map-front";
import type { LoadSnapshot } from "@dispatch/gateway/src/routing/load-tracker";
import type { SimRequest } from "./workload";

export interface EngineConfig {
  blockSize: number;
  kvBlocks: number;
  chunkTokens: number;
  maxBatch: number;
  prefillMsPerToken: number;
  stepBaseMs: number;
  stepPerSeqMs: number;
}

export type SimKvEvent = { case: "stored"; value: { blockHashes: bigint[] } } | { case: "evicted"; value: { blockHashes: bigint[] } };

interface Seq {
  req: SimRequest;
  arrivedAt: number;
  hitTokens: number;
  prefillLeft: number;
  decodeLeft: number;
  decoding: boolean;
  held: bigint[];
  privateBlocks: number;
  /** Prefill tokens planned for the current iteration. */
  planned: number;
}

export interface SeqResult {
  req: SimRequest;
  ttftMs: number;
  hitTokens: number;
}

export interface IterationResult {
  firstTokens: SeqResult[];
  finished: SimRequest[];
  events: SimKvEvent[];
}

export class SimServer {
  readonly cache = new Map<bigint, number>();
  private readonly lru = new Map<bigint, true>();
  /** The LRU's oldest block in O(1) (common/src/map-front.ts). */
  private readonly lruFront = mapFront(this.lru);
  private used = 0;
  private waiting: Seq[] = [];
  private waitingHead = 0;
  private running: Seq[] = [];
  private events: SimKvEvent[] = [];
  /** Uncached prompt tokens of the waiting requests; undefined when the cache or the queue changed since. */
  private waitingPrefill: number | undefined = 0;
  busy = false;
  busyMs = 0;
  /** Marginal work done here: prefill and per-sequence decode time, without the fixed step cost. */
  workMs = 0;
  hitTokens = 0;
  promptTokens = 0;
  prefilledTokens = 0;

  constructor(
    readonly id: string,
    readonly cfg: EngineConfig,
  ) {}

  /** Leading prompt blocks cached here right now. */
  cachedPrefix(hashes: readonly bigint[]): number {
    let n = 0;
    while (n < hashes.length && this.cache.has(hashes[n]!)) n++;
    return n;
  }

  enqueue(req: SimRequest, now: number): void {
    this.waiting.push({ req, arrivedAt: now, hitTokens: 0, prefillLeft: 0, decodeLeft: 0, decoding: false, held: [], privateBlocks: 0, planned: 0 });
    this.waitingPrefill = undefined;
  }

  get runningCount(): number {
    return this.running.length;
  }

  get waitingCount(): number {
    return this.waiting.length - this.waitingHead;
  }

  /**
   * Prompt tokens still to prefill, running and waiting. A waiting prompt
   * counts only what the cache does not cover *now* (like the model server's
   * scheduler, model-server/src/engine/scheduler.ts): a follower queued
   * behind the request computing its prefix costs its own suffix once that
   * prefix is stored.
   */
  queuedPrefillTokens(): number {
    if (this.waitingPrefill === undefined) {
      const bs = this.cfg.blockSize;
      let w = 0;
      for (let i = this.waitingHead; i < this.waiting.length; i++) {
        const r = this.waiting[i]!.req;
        const maxHit = Math.min(r.promptHashes.length, Math.floor((r.promptTokens - 1) / bs));
        w += r.promptTokens - Math.min(maxHit, this.cachedPrefix(r.promptHashes)) * bs;
      }
      this.waitingPrefill = w;
    }
    let q = this.waitingPrefill;
    for (const s of this.running) q += s.prefillLeft;
    return q;
  }

  /** Sequences already holding prompt blocks being prefilled (for the oracle). */
  inPrefill(): readonly SimRequest[] {
    return this.running.filter((s) => s.prefillLeft > 0).map((s) => s.req);
  }

  stepMs(): number {
    return this.cfg.stepBaseMs + this.cfg.stepPerSeqMs * this.running.length;
  }

  load(): LoadSnapshot {
    return {
      running: this.running.length,
      waiting: this.waitingCount,
      queuedPrefillTokens: this.queuedPrefillTokens(),
      kvBlocksUsed: this.used - this.lru.size,
      kvBlocksTotal: this.cfg.kvBlocks,
      prefillTokensPerS: 1000 / this.cfg.prefillMsPerToken,
      decodeStepsPerS: 1000 / this.stepMs(),
    };
  }

  /**
   * Plan one iteration, as a chunked-prefill engine does: every decoding
   * sequence takes one token of the `chunkTokens` budget, running prefills
   * continue first come first served, then waiting requests are admitted
   * while budget, batch slots and KV blocks last. A request's cache match is
   * taken at admission. Returns the duration, or undefined when idle.
   */
  startIteration(): number | undefined {
    let budget = this.cfg.chunkTokens;
    let prefill = 0;
    let decoding = 0;
    for (const s of this.running) if (s.decoding) decoding++;
    budget -= decoding;
    for (const s of this.running) {
      s.planned = 0;
      if (s.decoding || budget <= 0) continue;
      s.planned = Math.min(budget, s.prefillLeft);
      budget -= s.planned;
      prefill += s.planned;
    }
    prefill += this.admit(budget);
    if (this.running.length === 0) return undefined;
    const ms = this.cfg.stepBaseMs + this.cfg.stepPerSeqMs * decoding + this.cfg.prefillMsPerToken * prefill;
    this.busyMs += ms;
    this.workMs += this.cfg.stepPerSeqMs * decoding + this.cfg.prefillMsPerToken * prefill;
    this.prefilledTokens += prefill;
    this.busy = true;
    return ms;
  }

  /** Apply the planned iteration at its end time `now`. */
  endIteration(now: number): IterationResult {
    const firstTokens: SeqResult[] = [];
    const finished: SimRequest[] = [];
    const bs = this.cfg.blockSize;
    const next: Seq[] = [];
    for (const s of this.running) {
      if (s.decoding) {
        s.decodeLeft -= 1;
      } else if (s.planned > 0) {
        s.prefillLeft -= s.planned;
        s.planned = 0;
        // Full prompt blocks become reusable as soon as they are computed.
        const computed = s.req.promptTokens - s.prefillLeft;
        this.store(s, s.req.promptHashes.slice(0, Math.min(s.req.promptHashes.length, Math.floor(computed / bs))));
        if (s.prefillLeft === 0) {
          s.decoding = true;
          s.decodeLeft = s.req.outputTokens - 1;
          firstTokens.push({ req: s.req, ttftMs: now - s.arrivedAt, hitTokens: s.hitTokens });
        }
      }
      if (s.decoding && s.decodeLeft <= 0) {
        this.store(s, s.req.seqHashes);
        this.release(s);
        finished.push(s.req);
      } else next.push(s);
    }
    this.running = next;
    this.busy = false;
    const events = this.events;
    this.events = [];
    return { firstTokens, finished, events };
  }

  /** Admit waiting requests into this iteration; returns the prefill tokens they take. */
  private admit(budget: number): number {
    const { blockSize, kvBlocks, maxBatch } = this.cfg;
    let taken = 0;
    while (budget > 0 && this.waitingHead < this.waiting.length && this.running.length < maxBatch) {
      const s = this.waiting[this.waitingHead]!;
      // Never reuse the block holding the last prompt token: its logits are needed.
      const maxHit = Math.min(s.req.promptHashes.length, Math.floor((s.req.promptTokens - 1) / blockSize));
      const matched = Math.min(maxHit, this.cachedPrefix(s.req.promptHashes));
      const need = Math.ceil((s.req.promptTokens + s.req.outputTokens) / blockSize) - matched;
      if (need > kvBlocks - this.used + this.lru.size) {
        // Head of line waits for memory; if nothing runs, it can never fit.
        if (this.running.length === 0) throw new Error(`request ${s.req.id} needs more KV than server ${this.id} has`);
        break;
      }
      const evicted: bigint[] = [];
      while (kvBlocks - this.used < need) {
        const h = this.lruFront.shift()!;
        this.cache.delete(h);
        this.used -= 1;
        evicted.push(h);
      }
      if (evicted.length > 0) {
        this.events.push({ case: "evicted", value: { blockHashes: evicted } });
        this.waitingPrefill = undefined;
      }
      for (let i = 0; i < matched; i++) this.ref(s.req.promptHashes[i]!);
      s.held = s.req.promptHashes.slice(0, matched);
      s.privateBlocks = need;
      this.used += need;
      s.hitTokens = matched * blockSize;
      s.prefillLeft = s.req.promptTokens - s.hitTokens;
      s.planned = Math.min(budget, s.prefillLeft);
      budget -= s.planned;
      taken += s.planned;
      this.hitTokens += s.hitTokens;
      this.promptTokens += s.req.promptTokens;
      this.waitingPrefill = undefined;
      this.waitingHead += 1;
      this.running.push(s);
    }
    if (this.waitingHead > 1024 && this.waitingHead * 2 > this.waiting.length) {
      this.waiting = this.waiting.slice(this.waitingHead);
      this.waitingHead = 0;
    }
    return taken;
  }

  private ref(h: bigint): void {
    const r = this.cache.get(h)!;
    if (r === 0) this.lru.delete(h);
    this.cache.set(h, r + 1);
  }

  /** Turn the sequence's private blocks for `hashes` (beyond what it holds) into shared cached blocks. */
  private store(s: Seq, hashes: readonly bigint[]): void {
    const stored: bigint[] = [];
    for (let i = s.held.length; i < hashes.length && s.privateBlocks > 0; i++) {
      const h = hashes[i]!;
      if (this.cache.has(h)) {
        // Computed twice (another sequence stored it first): keep theirs, free ours.
        this.ref(h);
        this.used -= 1;
      } else {
        this.cache.set(h, 1);
        stored.push(h);
      }
      s.privateBlocks -= 1;
      s.held.push(h);
    }
    if (stored.length > 0) {
      this.events.push({ case: "stored", value: { blockHashes: stored } });
      this.waitingPrefill = undefined;
    }
  }

  private release(s: Seq): void {
    for (const h of s.held) {
      const r = this.cache.get(h)! - 1;
      this.cache.set(h, r);
      if (r === 0) this.lru.set(h, true);
    }
    this.used -= s.privateBlocks;
    s.held = [];
    s.privateBlocks = 0;
  }
}
