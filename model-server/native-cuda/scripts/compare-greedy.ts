/**
 * Greedy agreement of the CUDA backend with transformers in bf16 (hf_bf16_greedy.py's JSON):
 * all prompts of a fixture decoded together (block size 16, decode steps from CUDA graphs),
 * EOS ignored. Per prompt: positions identical before the first divergence, and at that
 * divergence both sides' top-2 gaps and our token. One JSON line per arch; near-ties.ts then
 * classifies each divergence against the fp32 reference.
 *
 *   bun model-server/native-cuda/scripts/compare-greedy.ts /tmp/hf.json
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { createCudaRunner } from "../../src/model/cuda-runner";
import { top2 } from "../../src/model/testing/top2";

type HfCase = { prompt: number[]; tokens: number[]; gaps: number[] };
const hf: Record<string, HfCase[]> = JSON.parse(readFileSync(process.argv[2]!, "utf8"));
const FIXTURES = join(import.meta.dir, "..", "..", "fixtures", "golden");
const BS = 16;

let total = 0;
let agreed = 0;
for (const [arch, cases] of Object.entries(hf)) {
  const runner = await createCudaRunner({ dir: join(FIXTURES, arch) });
  const n = cases[0]!.tokens.length;
  const per = Math.ceil((Math.max(...cases.map((c) => c.prompt.length)) + n) / BS);
  runner.allocateKv(cases.length * per, BS);
  const tables = cases.map((_, i) => Int32Array.from({ length: per }, (_, j) => i * per + j));
  const first = await runner.forward({ seqs: cases.map((c, i) => ({ tokens: Int32Array.from(c.prompt), startPos: 0, blockTable: tables[i]!, numLogits: 1 })) });
  let next = first.map(top2);
  const ours = cases.map(() => [] as { best: number; gap: number }[]);
  for (let s = 0; s < n; s++) {
    next.forEach((t, i) => ours[i]!.push(t));
    if (s === n - 1) break;
    const out = await runner.forward({
      seqs: cases.map((c, i) => ({ tokens: Int32Array.of(ours[i]!.at(-1)!.best), startPos: c.prompt.length + s, blockTable: tables[i]!, numLogits: 1 })),
    });
    next = out.map(top2);
  }
  const rows = cases.map((c, i) => {
    let k = 0;
    while (k < n && ours[i]![k]!.best === c.tokens[k]) k++;
    total += n;
    agreed += k;
    return k === n ? { agree: k } : { agree: k, hfGap: +c.gaps[k]!.toFixed(4), ourGap: +ours[i]![k]!.gap.toFixed(4), ourToken: ours[i]![k]!.best };
  });
  console.log(JSON.stringify({ arch, tokens: n, prompts: rows, graphs: runner.graphsCaptured() }));
  runner.close();
}
console.log(JSON.stringify({ summary: "positions identical before the first divergence", agreed, total, share: +(agreed / total).toFixed(4) }));
