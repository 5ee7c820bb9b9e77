/**
 * The generated workloads. Prompts are real token streams (seeded random
 * token ids) hashed with the same chained block hashes the gateway and model
 * server use (common/src/block-hash.ts), so shared text means shared hashes.
 */
import { hashBlocks, rootHash } from "@dispatch/common/src/block-hash";
import { createRng, exponential, mixSeed, shuffle, uniformInt, zipfSampler } from "./rng";
import type { SimRequest, Workload } from "./workload";

export const SIM_MODEL = "dispatch-sim";
const VOCAB = 50_000;

function tokens(seed: number, n: number): number[] {
  const r = createRng(seed);
  const out = new Array<number>(n);
  for (let i = 0; i < n; i++) out[i] = Math.floor(r() * VOCAB);
  return out;
}

/** Poisson arrivals in list order. */
export function poissonArrivals(n: number): Workload["arrivals"] {
  return (perMs, rand) => {
    const out: number[] = [];
    let t = 0;
    for (let i = 0; i < n; i++) {
      t += exponential(rand, 1 / perMs);
      out.push(t);
    }
    return out;
  };
}

function request(id: number, stream: number[], promptLen: number, outLen: number, blockSize: number, root: bigint): SimRequest {
  const all = hashBlocks(stream.slice(0, promptLen + outLen), blockSize, root);
  return {
    id,
    promptTokens: promptLen,
    outputTokens: outLen,
    promptHashes: all.slice(0, Math.floor(promptLen / blockSize)),
    seqHashes: all,
  };
}

interface GroupsSpec {
  name: string;
  description: string;
  groups: number;
  requests: number;
  systemTokens: number;
  questionTokens: number;
  outputTokens: number;
  /** Group of the i-th request. */
  pick: (rand: () => number, i: number) => number;
  order: (rand: () => number, groups: number[]) => number[];
}

function groupsWorkload(spec: GroupsSpec, blockSize: number, seed: number, kvTokensPerServer: number): Workload {
  const rand = createRng(mixSeed(seed, 1));
  const root = rootHash(SIM_MODEL);
  const system = Array.from({ length: spec.groups }, (_, g) => tokens(mixSeed(seed, 2, g), spec.systemTokens));
  const picks = spec.order(rand, Array.from({ length: spec.requests }, (_, i) => spec.pick(rand, i)));
  const requests = picks.map((g, i) => {
    const stream = system[g]!.concat(tokens(mixSeed(seed, 3, i), spec.questionTokens + spec.outputTokens));
    return request(i, stream, spec.systemTokens + spec.questionTokens, spec.outputTokens, blockSize, root);
  });
  return { name: spec.name, description: spec.description, requests, kvTokensPerServer, arrivals: poissonArrivals(requests.length) };
}

/** 64 groups x 16 prompts: a 2,048-token system prompt, a 128-token question, 256 tokens out; random order. */
export function sharedPrefixWorkload(blockSize: number, seed: number): Workload {
  return groupsWorkload(
    {
      name: "shared-prefix",
      description: "64 groups x 16 prompts; 2,048-token system prompt + 128-token question; 256 out; random order",
      groups: 64,
      requests: 1024,
      systemTokens: 2048,
      questionTokens: 128,
      outputTokens: 256,
      pick: (_r, i) => i % 64,
      order: (r, g) => shuffle(r, g),
    },
    blockSize,
    seed,
    48_000,
  );
}

/** The same shapes with group popularity Zipf(1.1) over 64 groups: a few hot prefixes. */
export function zipfWorkload(blockSize: number, seed: number): Workload {
  return groupsWorkload(
    {
      name: "zipf-groups",
      description: "1,024 prompts over 64 groups drawn Zipf(s=1.1); 2,048-token system prompt + 128-token question; 256 out",
      groups: 64,
      requests: 1024,
      systemTokens: 2048,
      questionTokens: 128,
      outputTokens: 256,
      pick: zipfPick(64, 1.1, seed),
      order: (_r, g) => g,
    },
    blockSize,
    seed,
    48_000,
  );
}

function zipfPick(n: number, s: number, seed: number): (rand: () => number, i: number) => number {
  const sample = zipfSampler(createRng(mixSeed(seed, 4)), n, s);
  // Permute ranks so the hot groups are not always groups 0, 1, 2.
  const perm = shuffle(createRng(mixSeed(seed, 5)), Array.from({ length: n }, (_, k) => k));
  return () => perm[sample()]!;
}

/**
 * Multi-turn chat: `users` conversations of `rounds` turns after one
 * 1,000-token system prompt shared by all; ~100-token questions and answers,
 * so each turn's prompt is the whole history so far. Turns go out round by
 * round in a shuffled user order; a turn never arrives before the previous
 * turn's answer is complete. Requests carry the user as affinity key
 * (OpenAI `prompt_cache_key`).
 */
export function multiTurnWorkload(blockSize: number, seed: number, users = 256, rounds = 6, keyed = true): Workload {
  const rand = createRng(mixSeed(seed, 11));
  const root = rootHash(SIM_MODEL);
  const system = tokens(mixSeed(seed, 12), 1000);
  const convs = Array.from({ length: users }, (_, u) => {
    const r = createRng(mixSeed(seed, 13, u));
    const turns = Array.from({ length: rounds }, () => ({ q: uniformInt(r, 60, 140), a: uniformInt(r, 80, 120) }));
    const total = turns.reduce((s, t) => s + t.q + t.a, 0);
    const stream = system.concat(tokens(mixSeed(seed, 14, u), total));
    return { turns, stream, hashes: hashBlocks(stream, blockSize, root) };
  });
  const requests: SimRequest[] = [];
  const lastOf = new Map<number, number>();
  for (let round = 0; round < rounds; round++) {
    for (const u of shuffle(rand, Array.from({ length: users }, (_, k) => k))) {
      const c = convs[u]!;
      let promptLen = 1000;
      for (let k = 0; k < round; k++) promptLen += c.turns[k]!.q + c.turns[k]!.a;
      promptLen += c.turns[round]!.q;
      const out = c.turns[round]!.a;
      const id = requests.length;
      requests.push({
        id,
        promptTokens: promptLen,
        outputTokens: out,
        promptHashes: c.hashes.slice(0, Math.floor(promptLen / blockSize)),
        seqHashes: c.hashes.slice(0, Math.floor((promptLen + out) / blockSize)),
        affinityKey: keyed ? `user-${u}` : undefined,
        after: lastOf.get(u),
      });
      lastOf.set(u, id);
    }
  }
  return {
    name: keyed ? "multi-turn" : "multi-turn-nokey",
    description: `${users} users x ${rounds} rounds; 1,000-token shared system prompt; ~100-token questions and answers; history grows${keyed ? "; user id as prompt_cache_key" : "; no session key"}`,
    requests,
    kvTokensPerServer: 48_000,
    arrivals: poissonArrivals(requests.length),
  };
}
