/** What the simulator replays: requests with their block hashes, and how they arrive. */

export interface SimRequest {
  id: number;
  promptTokens: number;
  outputTokens: number;
  /** Chained hashes of the prompt's full blocks. */
  promptHashes: bigint[];
  /** Chained hashes of the full blocks of prompt + output (what the server caches at the end). */
  seqHashes: bigint[];
  affinityKey?: string;
  /** Multi-turn: the request (id) whose answer this one's prompt contains; it cannot arrive earlier. */
  after?: number;
}

export interface Workload {
  name: string;
  description: string;
  requests: SimRequest[];
  /** KV cache per simulated server, in tokens. */
  kvTokensPerServer: number;
  /** Planned arrival times (ms) for a mean rate of `perMs` requests per ms. */
  arrivals(perMs: number, rand: () => number): number[];
}
