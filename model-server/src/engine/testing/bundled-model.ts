/**
 * The bundled tiny-wordnet-moe model on the CPU backend for engine tests: loaded once per test file (beforeAll,
 * released in afterAll), with four short prompts encoded, and a helper that runs requests to completion.
 *
 *   const bundled = useBundledModel();
 *   test("...", async () => { const outs = await generateAll(engineOn(bundled.m.runner), [...]); });
 */
import { afterAll, beforeAll } from "bun:test";
import { join } from "node:path";
import { loadModel, type LoadedModel } from "../../model/load-model";
import type { Engine, GenerateParams } from "../engine";

const DIR = join(import.meta.dir, "..", "..", "..", "models", "tiny-wordnet-moe");
const PROMPTS = ["What is a river?", "Name a large animal.", "The word house means", "A tree is"];

export interface BundledModel {
  /** The loaded model (throws outside the tests, before beforeAll has run). */
  readonly m: LoadedModel;
  /** PROMPTS encoded by the model's tokenizer. */
  readonly prompts: number[][];
}

export function useBundledModel(): BundledModel {
  let model: LoadedModel | undefined;
  let prompts: number[][] = [];
  beforeAll(async () => {
    model = await loadModel({ dir: DIR, backend: "cpu" });
    prompts = PROMPTS.map((t) => model!.tokenizer.encode(t));
  });
  afterAll(() => {
    model?.runner.close();
    model?.tokenizer.free();
    model = undefined;
  });
  return {
    get m() {
      if (!model) throw new Error("the bundled model is loaded in beforeAll");
      return model;
    },
    get prompts() {
      return prompts;
    },
  };
}

/** One request's output: its tokens, each token's log-probability and top alternatives. */
export interface Generated {
  tokens: number[];
  logprobs: number[];
  tops: { token: number; logprob: number }[][];
}

/** Runs the requests on the engine together until each finishes, then closes the engine. */
export async function generateAll(engine: Engine, reqs: GenerateParams[]): Promise<Generated[]> {
  const outs = await Promise.all(
    reqs.map(async (r) => {
      const o: Generated = { tokens: [], logprobs: [], tops: [] };
      for await (const msg of engine.generate(r)) {
        o.tokens.push(...msg.tokenIds);
        for (const l of msg.logprobs) o.logprobs.push(l.logprob), o.tops.push(l.top);
      }
      return o;
    }),
  );
  await engine.close();
  return outs;
}
