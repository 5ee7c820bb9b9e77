/**
 * KV computed elsewhere (a prefill server's export) placed into a sequence's fresh blocks before it is scheduled:
 * the sequence then resumes after it. The last prompt token is always recomputed (its logits pick the first output
 * token), so at most the prompt's first promptLen - 1 positions are taken.
 *
 * @example
 * importKvInto(seq, params.importedKv, { bm, runner, blockSize: 16 });
 */
import type { KvExport, ModelRunner } from "../model/runner";
import type { BlockManager } from "./block-manager";
import { EngineError } from "./errors";
import type { Sequence } from "./sequence";

export function importKvInto(seq: Sequence, kv: KvExport, o: { bm: BlockManager; runner: ModelRunner; blockSize: number }): void {
  const B = o.blockSize;
  if (kv.blockSize !== B) throw new EngineError("invalid_argument", `imported KV has block size ${kv.blockSize}, this server uses ${B}`);
  if (kv.numBlocks * B > seq.promptLen + B - 1 || kv.numBlocks === 0) {
    throw new EngineError("invalid_argument", `imported KV has ${kv.numBlocks} blocks; the prompt of ${seq.promptLen} tokens needs at most ${Math.ceil(seq.promptLen / B)}`);
  }
  if (!o.bm.allocate(seq.blockTable, [], 0, kv.numBlocks)) throw new EngineError("resource_exhausted", `no room for ${kv.numBlocks} imported KV blocks`);
  o.runner.importKv(Int32Array.from(seq.blockTable), kv);
  seq.numComputed = Math.min(kv.numBlocks * B, seq.promptLen - 1);
  o.bm.truncate(seq.blockTable, Math.ceil(seq.numComputed / B));
}
