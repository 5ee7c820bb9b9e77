/**
 * The bundled model (model-server/models/tiny-wordnet-moe, qwen3_moe, bf16
 * weights) against transformers' own output for it (fp32 compute on the bf16
 * weights; fixtures/bundled, written by scripts/train_bundled.py), and a chat
 * turn that must come back as readable English ending in <|im_end|>.
 */
import { expect, test } from "bun:test";
import { join } from "node:path";
import { renderChat } from "../tokenizer/chat-template";
import { checkGolden } from "./testing/golden-check";
import { loadModel } from "./load-model";

const DIR = join(import.meta.dir, "..", "..", "models", "tiny-wordnet-moe");
const FIX = join(import.meta.dir, "..", "..", "fixtures", "bundled");

// The reference uses eager attention, as the golden fixtures do: transformers' own
// sdpa path differs from its eager path by up to 5.6e-3 on this model (train.log).
test("bundled model: logits match transformers within 1e-4, greedy continuations identical", async () => {
  const m = await loadModel({ dir: DIR });
  expect(m.info.architecture).toBe("qwen3_moe");
  const maxDiff = await checkGolden(m.runner, FIX, 1e-4, (i) => join(FIX, `bundled-logits-${i}.safetensors`), "bundled-golden.json");
  expect(maxDiff).toBeGreaterThanOrEqual(0);
  m.runner.close();
  m.tokenizer.free();
});

test("bundled model answers a chat question in readable English", async () => {
  const m = await loadModel({ dir: DIR });
  const ids = m.tokenizer.encode(renderChat(m.chat, [{ role: "user", content: "What is a river?" }], true), { allowSpecial: true });
  m.runner.allocateKv(8, 16);
  const table = Int32Array.from([0, 1, 2, 3, 4, 5, 6, 7]);
  let [logits] = await m.runner.forward({ seqs: [{ tokens: Int32Array.from(ids), startPos: 0, blockTable: table, numLogits: 1 }] });
  const out: number[] = [];
  let ended = false;
  for (let i = 0; i < 80 && !ended; i++) {
    let best = 0;
    for (let j = 1; j < logits!.length; j++) if (logits![j]! > logits![best]!) best = j;
    if (m.runner.spec.eosTokenIds.includes(best)) ended = true;
    else {
      out.push(best);
      [logits] = await m.runner.forward({ seqs: [{ tokens: Int32Array.of(best), startPos: ids.length + i, blockTable: table, numLogits: 1 }] });
    }
  }
  const text = m.tokenizer.decode(out);
  expect(ended).toBe(true);
  const words = text.split(/\s+/).filter(Boolean);
  expect(words.length).toBeGreaterThanOrEqual(4);
  // Readable: mostly alphabetic words, starts with a capital, ends with punctuation.
  expect(words.filter((w) => /^[A-Za-z"'(),.;:-]+$/.test(w)).length / words.length).toBeGreaterThan(0.9);
  expect(text).toMatch(/^[A-Z"]/);
  expect(text).toMatch(/[.!?"]$/);
  m.runner.close();
  m.tokenizer.free();
});
