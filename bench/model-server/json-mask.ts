/**
 * JSON mode's mask cost on the engine thread (model-server/src/engine/json-constraint.ts): the masks a JSON object's
 * states need, each computed once (a cold cache), over a BPE-like vocabulary of --vocab tokens (every byte, then
 * words, JSON punctuation and both mixed, seeded), along --text byte by byte.
 *
 *   bun bench/model-server/json-mask.ts [--vocab 150000] [--text '{"name": "the value", "n": [1, 2], "x": {"y": true}}']
 *
 * Prints one JSON line: masks computed, their total and worst milliseconds, and each one's (the byte it was for).
 */
import { parseArgs } from "node:util";
import { createJsonVocab } from "../../model-server/src/engine/json-constraint";
import { createRng } from "../../model-server/src/engine/rng";

const { values: a } = parseArgs({ options: { vocab: { type: "string", default: "150000" }, text: { type: "string", default: '{"name": "the value of the thing", "n": [1, 2], "x": {"y": true}}' } } });
const enc = new TextEncoder();
const size = Number(a.vocab);
if (!(size >= 256)) throw new Error("--vocab must be at least 256 (every byte is a token)");
const rng = createRng(3n);
const pieces = ["the", " the", "ing", " a", "name", "value", '":', '{"', '"}', '",', ' "', "[", "]}", "0", "12", ".5", "e+", "true", " false", "null", "\\n", '\\"', "é", "🌍", "\n  ", "    ", ",\n", " ", "\t", "\\u00", "ab", "Z"];
const toks: Uint8Array[] = Array.from({ length: 256 }, (_, b) => Uint8Array.of(b));
while (toks.length < size) {
  let t = "";
  for (let k = 1 + Math.floor(rng.next() * 3); k > 0; k--) t += pieces[Math.floor(rng.next() * pieces.length)];
  toks.push(enc.encode(t));
}
const times: number[] = [];
const vocab = createJsonVocab(toks.length, (id) => toks[id]!, [], (s) => times.push(s * 1000));
const c = vocab.constraint();
const per: string[] = [];
for (const b of enc.encode(a.text!)) {
  const n = times.length;
  c.allowed();
  if (times.length > n) per.push(`${String.fromCharCode(b)} ${times.at(-1)!.toFixed(1)}`);
  c.accept(b); // the byte's own token: ids 0-255 are the bytes
}
const total = times.reduce((x, y) => x + y, 0);
console.log(JSON.stringify({ vocab: toks.length, masks: times.length, totalMs: +total.toFixed(1), worstMs: +Math.max(...times).toFixed(1), perMask: per }));
