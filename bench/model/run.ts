/**
 * Model-runner benchmark: drives the ModelRunner directly (no engine, no RPC)
 * on the bundled model: prefill of N chat prompts in one step, then greedy
 * decoding of all N together, one token per sequence per step.
 *
 *   npm run bench:model                       # 1 and 8 streams, native kernels when built
 *   npm run bench:model -- --streams 1,4,8 --tokens 128 --native 0 --worker 0
 *
 * Prints a markdown table (decode tokens/s summed over streams, per-step latency).
 */
import { cpus, loadavg } from "node:os";
import { parseArgs } from "node:util";
import { join } from "node:path";
import { loadModel } from "../../model-server/src/model/load-model";
import { renderChat } from "../../model-server/src/tokenizer/chat-template";

const { values } = parseArgs({
  options: {
    model: { type: "string", default: join(import.meta.dir, "..", "..", "model-server", "models", "tiny-wordnet-moe") },
    streams: { type: "string", default: "1,8" },
    tokens: { type: "string", default: "128" },
    native: { type: "string", default: "1" },
    worker: { type: "string", default: "1" },
    "block-size": { type: "string", default: "16" },
    repeat: { type: "string", default: "3" },
  },
});

const QUESTIONS = ["What is a dog?", 'What does "happy" mean?', "Define the verb run.", "What is a river?", "Tell me what music is.", "What does it mean to borrow?", "What is a telescope?", 'What does "brave" mean?'];

const m = await loadModel({ dir: values.model!, native: values.native !== "0", worker: values.worker !== "0" });
const runner = m.runner;
const B = Number(values["block-size"]);
const decodeTokens = Number(values.tokens);
const repeat = Number(values.repeat);
const streamCounts = values.streams!.split(",").map(Number);
const maxStreams = Math.max(...streamCounts);
const perSeqBlocks = Math.ceil((64 + decodeTokens + 1) / B);
runner.allocateKv(maxStreams * perSeqBlocks, B);

const argmax = (row: Float32Array) => {
  let best = 0;
  for (let i = 1; i < row.length; i++) if (row[i]! > row[best]!) best = i;
  return best;
};

async function run(n: number) {
  const prompts = Array.from({ length: n }, (_, i) => m.tokenizer.encode(renderChat(m.chat, [{ role: "user", content: QUESTIONS[i % QUESTIONS.length]! }], true), { allowSpecial: true }));
  const tables = prompts.map((_, i) => Int32Array.from({ length: perSeqBlocks }, (_, j) => i * perSeqBlocks + j));
  const t0 = performance.now();
  let out = await runner.forward({ seqs: prompts.map((p, i) => ({ tokens: Int32Array.from(p), startPos: 0, blockTable: tables[i]!, numLogits: 1 })) });
  const prefillMs = performance.now() - t0;
  const pos = prompts.map((p) => p.length);
  const t1 = performance.now();
  for (let s = 0; s < decodeTokens; s++) {
    // EOS is ignored on purpose: every stream decodes the same number of tokens.
    out = await runner.forward({ seqs: out.map((l, i) => ({ tokens: Int32Array.of(argmax(l)), startPos: pos[i]!++, blockTable: tables[i]!, numLogits: 1 })) });
  }
  const decodeMs = performance.now() - t1;
  return { prefillTokens: prompts.reduce((a, p) => a + p.length, 0), prefillMs, decodeMs, tokPerS: (n * decodeTokens) / (decodeMs / 1000), stepMs: decodeMs / decodeTokens };
}

await run(1); // warm-up (JIT)
const load0 = loadavg()[0]!;
console.log(`model ${runner.spec.modelId} (${runner.spec.architecture}), kernels: ${runner.native ? "native" : "typescript"}, ${values.worker !== "0" ? "worker thread" : "in-thread"}, block size ${B}, ${decodeTokens} decode tokens per stream, best of ${repeat}`);
console.log("| streams | decode tokens/s (total) | per stream | step ms | prefill (tokens, ms) |");
console.log("|---|---|---|---|---|");
for (const n of streamCounts) {
  let best: Awaited<ReturnType<typeof run>> | null = null;
  for (let r = 0; r < repeat; r++) {
    const res = await run(n);
    if (!best || res.tokPerS > best.tokPerS) best = res;
  }
  console.log(`| ${n} | ${best!.tokPerS.toFixed(0)} | ${(best!.tokPerS / n).toFixed(0)} | ${best!.stepMs.toFixed(2)} | ${best!.prefillTokens}, ${best!.prefillMs.toFixed(1)} |`);
}
console.log(`machine: ${cpus().length} x ${cpus()[0]?.model ?? "cpu"}; 1-minute load average ${load0.toFixed(2)} before, ${loadavg()[0]!.toFixed(2)} after; ${new Date().toISOString()}`);
runner.close();
m.tokenizer.free();
