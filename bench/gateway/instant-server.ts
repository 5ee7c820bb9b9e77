/**
 * A model server for measuring the gateway, not the model: the real Connect service and engine
 * (scheduler, KV blocks, stream emission) over the instant runner
 * (model-server/src/engine/testing/instant-runner.ts), which answers each step after
 * `--device-ms` on a timer with the CPU free meanwhile. The tokenizer, chat template and model
 * id come from a real model directory (default: the bundled tiny-wordnet-moe), so the gateway
 * builds the same profile as in front of the CPU server. A 512-token prefill then costs
 * `--device-ms`, not ~100 ms of CPU matmuls, and the gateway's own microseconds stand out of
 * the noise.
 *
 *   bun bench/gateway/instant-server.ts --port 9000 [--model dir] [--device-ms 2] [--max-num-seqs 16] [--kv-blocks 8192]
 */
import { parseArgs } from "node:util";
import { join } from "node:path";
import { createEngine } from "../../model-server/src/engine/engine";
import { createInstantRunner } from "../../model-server/src/engine/testing/instant-runner";
import { loadServedModel } from "../../model-server/src/rpc/load-model";
import { startRpcServer } from "../../model-server/src/rpc/server";
import { createServingState } from "../../model-server/src/rpc/serving-state";
import { ROOT } from "./processes";

const { values } = parseArgs({
  options: {
    port: { type: "string", default: "0" },
    model: { type: "string", default: join(ROOT, "model-server/models/tiny-wordnet-moe") },
    "device-ms": { type: "string", default: "2" },
    "max-num-seqs": { type: "string", default: "16" },
    // KV blocks of 16 tokens; a few hundred starve a batch of long prompts, so sequences are preempted
    "kv-blocks": { type: "string", default: "8192" },
  },
});

const model = await loadServedModel(values.model!, { backend: "cpu" });
const spec = model.runner.spec;
const runner = createInstantRunner({ vocabSize: spec.vocabSize, maxContext: spec.maxContext, sampled: false, deviceMs: Number(values["device-ms"]) });
// The instant runner names itself "instant"; the gateway must see the real model's id.
Object.assign(runner.spec, { modelId: spec.modelId });
const state = createServingState();
const server = await startRpcServer({ state, host: "127.0.0.1", port: Number(values.port) });
const maxNumSeqs = Number(values["max-num-seqs"]);
const engine = createEngine({
  runner,
  blockSize: 16,
  numKvBlocks: Number(values["kv-blocks"]),
  maxNumSeqs,
  maxBatchTokens: 8192,
  maxQueue: 1024,
  serverId: "instant",
  tokenBytes: model.tokenBytes,
  onStep: (st) => server.metrics.engine.step(st),
});
state.setServing(engine, model.meta);
process.stderr.write(`[instant-server] ${spec.modelId} (vocab ${spec.vocabSize}) at ${server.url}, ${values["device-ms"]} ms per step\n`);
const stop = async () => {
  await server.stop();
  process.exit(0);
};
process.on("SIGINT", () => void stop());
process.on("SIGTERM", () => void stop());
