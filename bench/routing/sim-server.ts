/**
 * A simulated model server: continuous batching with chunked prefill over a
 * paged KV cache with prefix reuse and LRU eviction, in virtual time.
 *
 * One engine iteration takes
 *   stepBaseMs + stepPerSeqMs * (sequences decoding) + prefillMsPerToken * (prefill tokens this iteration)
 * and runs one decode step for every decoding sequence plus up to
 * `chunkTokens` of prefill, first come first served. A request is admitted
 * (FCFS, head of line) when the batch has room and its blocks fit:
 * ceil((prompt + output) / blockSize) minus the cached prefix blocks it reuses,
 * evicting unreferenced cached blocks least-recently-used first. Its prompt
 * blocks become reusable when its prefill finishes, its output blocks when
 * it finishes; a finished sequence's blocks stay cached until evicted. The
 * cache hit of a request is measured at admission (the truth the token-
 * weighted hit rate is computed from).
 *
 * It emits exactly what a dispatch model server publishes: KV events
 * (stored / evicted hashes) and load reports.
 */
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
  estPrefill: number;
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
  private used = 0;
  private waiting: Seq[] = [];
  private waitingHead = 0;
  private running: Seq[] = [];
  private events: SimKvEvent[] = [];
  private waitingPrefill = 0;
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
    const est = Math.max(1, req.promptTokens - this.cachedPrefix(req.promptHashes) * this.cfg.blockSize);
    this.waiting.push({ req, arrivedAt: now, hitTokens: 0, prefillLeft: 0, decodeLeft: 0, decoding: false, held: [], privateBlocks: 0, estPrefill: est });
    this.waitingPrefill += est;
  }

  get runningCount(): number {
    return this.running.length;
  }

  get waitingCount(): number {
    return this.waiting.length - this.waitingHead;
  }

  /** Prompt tokens still to prefill, running and waiting. */
  queuedPrefillTokens(): number {
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

  /** Admit what fits, then plan one iteration: its duration, or undefined when idle. */
  startIteration(): number | undefined {
    this.admit();
    if (this.running.length === 0) return undefined;
    let budget = this.cfg.chunkTokens;
    let prefill = 0;
    let decoding = 0;
    for (const s of this.running) {
      if (s.decoding) decoding++;
      else if (budget > 0) {
        const take = Math.min(budget, s.prefillLeft);
        budget -= take;
        prefill += take;
      }
    }
    this.plannedPrefill = prefill;
    const ms = this.cfg.stepBaseMs + this.cfg.stepPerSeqMs * decoding + this.cfg.prefillMsPerToken * prefill;
    this.busyMs += ms;
    this.workMs += this.cfg.stepPerSeqMs * decoding + this.cfg.prefillMsPerToken * prefill;
    this.busy = true;
    return ms;
  }

  private plannedPrefill = 0;

  /** Apply the planned iteration at its end time `now`. */
  endIteration(now: number): IterationResult {
    const firstTokens: SeqResult[] = [];
    const finished: SimRequest[] = [];
    let budget = this.plannedPrefill;
    this.prefilledTokens += budget;
    const next: Seq[] = [];
    for (const s of this.running) {
      if (s.decoding) {
        s.decodeLeft -= 1;
      } else if (budget > 0) {
        const take = Math.min(budget, s.prefillLeft);
        budget -= take;
        s.prefillLeft -= take;
        if (s.prefillLeft === 0) {
          s.decoding = true;
          s.decodeLeft = s.req.outputTokens - 1;
          this.store(s, s.req.promptHashes);
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

  private admit(): void {
    const { blockSize, kvBlocks, maxBatch } = this.cfg;
    while (this.waitingHead < this.waiting.length && this.running.length < maxBatch) {
      const s = this.waiting[this.waitingHead]!;
      const matched = this.cachedPrefix(s.req.promptHashes);
      const need = Math.ceil((s.req.promptTokens + s.req.outputTokens) / blockSize) - matched;
      if (need > kvBlocks - this.used + this.lru.size) {
        // Head of line waits for memory; if nothing runs, it can never fit.
        if (this.running.length === 0) throw new Error(`request ${s.req.id} needs more KV than server ${this.id} has`);
        return;
      }
      const evicted: bigint[] = [];
      while (kvBlocks - this.used < need) {
        const h = this.lru.keys().next().value!;
        this.lru.delete(h);
        this.cache.delete(h);
        this.used -= 1;
        evicted.push(h);
      }
      if (evicted.length > 0) this.events.push({ case: "evicted", value: { blockHashes: evicted } });
      for (let i = 0; i < matched; i++) this.ref(s.req.promptHashes[i]!);
      s.held = s.req.promptHashes.slice(0, matched);
      s.privateBlocks = need;
      this.used += need;
      s.hitTokens = Math.min(s.req.promptTokens, matched * blockSize);
      s.prefillLeft = Math.max(1, s.req.promptTokens - s.hitTokens);
      this.hitTokens += s.hitTokens;
      this.promptTokens += s.req.promptTokens;
      this.waitingPrefill -= s.estPrefill;
      this.waitingHead += 1;
      this.running.push(s);
    }
    if (this.waitingHead > 1024 && this.waitingHead * 2 > this.waiting.length) {
      this.waiting = this.waiting.slice(this.waitingHead);
      this.waitingHead = 0;
    }
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
    if (stored.length > 0) this.events.push({ case: "stored", value: { blockHashes: stored } });
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
