/**
 * Engines over real runners for in-process tests: small test defaults, every
 * engine made kept so one `closeAll()` in afterAll closes them, and a helper
 * that collects a request's generated tokens.
 *
 * @example
 * const kit = createEngineKit();
 * const e = kit.engine({ runner: model.runner, tokenBytes: model.tokenBytes, numKvBlocks: 10 });
 * const ids = await generatedTokens(e, { promptTokenIds: [1, 2, 3], stop: { maxTokens: 8, ignoreEos: true } });
 * await kit.closeAll();
 */
import { createEngine, type Engine, type EngineOptions, type GenerateParams } from "../src/engine/engine";

/** Room for a few concurrent test sequences; tests override what they exercise (e.g. numKvBlocks). */
export const TEST_ENGINE_DEFAULTS = { blockSize: 16, numKvBlocks: 256, maxNumSeqs: 8, maxBatchTokens: 128, maxQueue: 64, serverId: "t" } as const;

export interface EngineKit {
  /** A new engine: the defaults above, then `o`. */
  engine(o: Pick<EngineOptions, "runner"> & Partial<EngineOptions>): Engine;
  /** Closes every engine made so far. */
  closeAll(): Promise<void>;
}

export function createEngineKit(): EngineKit {
  const engines: Engine[] = [];
  return {
    engine(o) {
      const e = createEngine({ ...TEST_ENGINE_DEFAULTS, ...o });
      engines.push(e);
      return e;
    },
    async closeAll() {
      for (const e of engines) await e.close();
    },
  };
}

/** Every token id the engine generates for `p`, in order. */
export async function generatedTokens(e: Engine, p: GenerateParams): Promise<number[]> {
  const out: number[] = [];
  for await (const o of e.generate(p)) out.push(...o.tokenIds);
  return out;
}
