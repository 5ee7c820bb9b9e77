/**
 * The Mooncake (FAST'25) conversation trace as a workload: real arrivals,
 * lengths and prefix sharing. Each line's `hash_ids` are 512-token blocks;
 * each is expanded into 512 / blockSize simulator blocks whose chained hashes
 * derive from the trace id, so equal ids at equal positions share hashes.
 * Outputs are unique (the trace says nothing about their text).
 */
import { existsSync, readFileSync } from "node:fs";
import { hashBlock, rootHash } from "@dispatch/common/src/block-hash";
import { SIM_MODEL } from "./workloads";
import type { SimRequest, Workload } from "./workload";

export const DEFAULT_TRACE = "/work/shared/data/mooncake/conversation_trace.jsonl";
const TRACE_BLOCK = 512;

interface TraceLine {
  timestamp: number;
  input_length: number;
  output_length: number;
  hash_ids: number[];
}

export function traceWorkload(path: string, blockSize: number, limit: number, kvTokensPerServer = 1_000_000): Workload {
  if (!existsSync(path)) {
    throw new Error(`Mooncake trace not found at ${path}: pass --trace <path to conversation_trace.jsonl> or --skip-trace`);
  }
  if (TRACE_BLOCK % blockSize !== 0) throw new RangeError(`blockSize must divide ${TRACE_BLOCK}, got ${blockSize}`);
  const lines = readFileSync(path, "utf8").split("\n").filter((l) => l.trim().length > 0).slice(0, limit);
  const parsed = lines.map((l, i) => {
    const o = JSON.parse(l) as TraceLine;
    if (!Array.isArray(o.hash_ids) || !(o.input_length > 0)) throw new Error(`${path}:${i + 1}: not a Mooncake trace line`);
    return o;
  });
  const root = rootHash(SIM_MODEL);
  const per = TRACE_BLOCK / blockSize;
  const words = new Uint32Array(3);
  const requests: SimRequest[] = parsed.map((o, id) => {
    const full = Math.floor(o.input_length / blockSize);
    const seqFull = Math.floor((o.input_length + o.output_length) / blockSize);
    const hashes: bigint[] = [];
    let parent = root;
    for (let b = 0; b < seqFull; b++) {
      const traceBlock = Math.floor(b / per);
      const inPrompt = b < full && traceBlock < o.hash_ids.length;
      // Prompt blocks come from the trace ids; output blocks are unique to this request.
      words[0] = inPrompt ? o.hash_ids[traceBlock]! : 0xffffffff;
      words[1] = inPrompt ? b % per : id;
      words[2] = inPrompt ? 0 : b;
      parent = hashBlock(parent, words);
      hashes.push(parent);
    }
    return {
      id,
      promptTokens: o.input_length,
      outputTokens: Math.max(1, o.output_length),
      promptHashes: hashes.slice(0, full),
      seqHashes: hashes,
    };
  });
  const stamps = parsed.map((o) => o.timestamp);
  const first = stamps[0] ?? 0;
  const span = Math.max(1, (stamps[stamps.length - 1] ?? 0) - first);
  return {
    name: "mooncake-trace",
    description: `first ${requests.length} requests of the Mooncake conversation trace (real arrivals rescaled, lengths, prefix sharing)`,
    requests,
    kvTokensPerServer,
    arrivals(perMs) {
      // Keep the trace's burstiness, stretch or squeeze it to the target mean rate.
      const scale = requests.length / perMs / span;
      return stamps.map((t) => (t - first) * scale);
    },
  };
}
