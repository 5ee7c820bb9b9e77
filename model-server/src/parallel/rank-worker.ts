/**
 * One rank of a loopback expert-parallel group (a worker thread standing in for
 * one GPU's process). It loads the model, builds its ExpertParallel over the
 * shared-memory transport, and follows rank 0's step plans: it runs the
 * sequences the plan gives it, or — with none — still takes part in every MoE
 * layer's dispatch and combine with zero tokens, as the collective requires.
 * Messages, in order:
 *   {op:"load", id, init}   -> {id, ok:{config, native}}
 *   {op:"attachKv", kv}     (the KV storage shared by the group; a sequence writes only its own blocks)
 *   {op:"step", id, plan}   -> {id, ok:{buffer, lengths, stats}} logits of this rank's sequences, in plan order
 * Any failure -> {id, error:{name, message, code?}}.
 */
import { CpuKv, createCpuBackend } from "../backend/cpu/cpu-backend";
import { openCheckpoint } from "../loader/checkpoint";
import { readModelConfig } from "../model/cpu-runner";
import { cpuKvFromShared, packStepOutput, type SharedCpuKv } from "../model/cpu-runner-common";
import { createMoeModel, type MoeModel } from "../model/moe-model";
import { loadWeights, type ModelWeights } from "../model/weights";
import type { ModelConfig } from "../model/config";
import { createCpuExpertParallel } from "./cpu-expert-parallel";
import { createLoopbackTransport, type LoopbackShared, type LoopbackTransport } from "./loopback-transport";
import { createPlacement } from "./placement";
import { decodeStepPlan } from "./step-plan";

declare const self: Worker;

export interface RankInit {
  dir: string;
  modelId?: string;
  native?: boolean;
  rank: number;
  /** Each rank's global expert ids (same for every MoE layer). */
  placement: number[][];
  shared: LoopbackShared;
  align?: number;
  timeoutMs?: number;
}

let state: {
  config: ModelConfig;
  weights: ModelWeights;
  model: MoeModel;
  be: ReturnType<typeof createCpuBackend>;
  ep: ReturnType<typeof createCpuExpertParallel>;
  transport: LoopbackTransport;
} | null = null;
let kv: CpuKv | null = null;

const fail = (id: number | undefined, e: unknown) => {
  const err = e instanceof Error ? e : new Error(String(e));
  self.postMessage({ id, error: { name: err.name, message: `rank ${state?.ep.rank ?? "?"}: ${err.message}`, code: (err as { code?: string }).code } });
};

function load(init: RankInit) {
  const config = readModelConfig(init.dir, init.modelId);
  const be = createCpuBackend({ native: init.native });
  const weights = loadWeights(config, openCheckpoint(init.dir), be);
  const numExperts = config.layers.find((l) => l.kind === "moe")?.numExperts ?? 0;
  const placement = createPlacement(numExperts, init.placement);
  const transport = createLoopbackTransport(init.shared, init.rank, init.timeoutMs);
  const ep = createCpuExpertParallel({ transport, placement, hidden: config.hidden, native: be.native, align: init.align });
  state = { config, weights, be, ep, transport, model: createMoeModel(config, weights, be, { expertParallel: ep }) };
}

/** A rank with no sequences this step: zero-token dispatch/combine in each MoE layer, in layer order. */
function idle() {
  const { config, weights, be, ep } = state!;
  const empty = be.alloc(0, config.hidden);
  weights.layers.forEach((w, l) => {
    const cfg = config.layers[l]!;
    if (w.mlp.kind !== "moe" || cfg.kind !== "moe") return;
    ep.moe(empty, w.mlp.w.experts, { ids: new Int32Array(0), weights: new Float32Array(0), topK: cfg.topK }, be.alloc(0, config.hidden));
  });
}

self.onmessage = (ev: MessageEvent) => {
  const m = ev.data as { op: string; id?: number; init?: RankInit; kv?: SharedCpuKv; plan?: Int32Array };
  try {
    switch (m.op) {
      case "load":
        load(m.init!);
        self.postMessage({ id: m.id, ok: { config: state!.config, native: state!.be.native } });
        return;
      case "attachKv": {
        kv = cpuKvFromShared(m.kv!);
        return;
      }
      case "step": {
        if (!state || !kv) throw new Error("step before load/attachKv");
        const plan = decodeStepPlan(m.plan!);
        const mine = plan.ranks[state.ep.rank]!;
        state.ep.beginStep({ mode: plan.mode, maxTokensPerRank: plan.maxTokensPerRank });
        const out = mine.tokens === 0 ? mine.seqs.map(() => new Float32Array(0)) : state.model.forward({ seqs: mine.seqs }, kv);
        if (mine.tokens === 0) idle();
        const packed = packStepOutput(out);
        self.postMessage({ id: m.id, ok: { ...packed, stats: { ...state.ep.stats } } }, [packed.buffer]);
        return;
      }
      default:
        throw new Error(`unknown op ${m.op}`);
    }
  } catch (e) {
    // A failed step leaves the peers inside a collective: release them now.
    if (m.op === "step") state?.transport.abort();
    fail(m.id, e);
  }
};
