import { expect, test } from "bun:test";
import { createJsonVocab } from "./json-constraint";
import { ANY_OBJECT, compileSchema } from "./json-schema";
import { jsonStart, stepJsonBytes } from "./json-state";
import { createRng } from "./rng";

const enc = new TextEncoder();

/** A vocabulary like a BPE one: every byte, then pieces of words, JSON punctuation and both mixed. */
function vocab(extra: number, seed = 1n): Uint8Array[] {
  const rng = createRng(seed);
  const pick = <T>(xs: readonly T[]) => xs[Math.floor(rng.next() * xs.length)]!;
  const pieces = ["the", " the", "ing", " a", "name", "value", "\":", "{\"", "\"}", "\",", " \"", "[", "]}", "0", "12", ".5", "e+", "true", " false", "null", "\\n", "\\\"", "é", "🌍", "\n  ", "    ", ",\n", " ", "\t", "\\u00", "ab", "Z"];
  const out: Uint8Array[] = Array.from({ length: 256 }, (_, b) => Uint8Array.of(b));
  for (let i = 0; i < extra; i++) {
    let t = "";
    const n = 1 + Math.floor(rng.next() * 3);
    for (let k = 0; k < n; k++) t += pick(pieces);
    out.push(enc.encode(t));
  }
  return out;
}

test("random walks over the allowed tokens always end in one JSON object", () => {
  const toks = vocab(3000);
  const EOS = toks.length;
  const v = createJsonVocab(toks.length + 1, (id) => (id < toks.length ? toks[id]! : enc.encode("<|eos|>")), [EOS]);
  const rng = createRng(7n);
  let completed = 0;
  for (let walk = 0; walk < 200; walk++) {
    const c = v.constraint();
    const out: number[] = [];
    for (let step = 0; step < 400 && !c.complete; step++) {
      const m = c.allowed();
      expect(m[EOS]).toBe(0);
      const ids: number[] = [];
      for (let id = 0; id < m.length; id++) if (m[id]) ids.push(id);
      expect(ids.length).toBeGreaterThan(0);
      // prefer closing characters now and then, so walks finish
      const closers = ids.filter((id) => toks[id]!.length === 1 && (toks[id]![0] === 0x7d || toks[id]![0] === 0x5d || toks[id]![0] === 0x22));
      const id = closers.length && rng.next() < 0.3 ? closers[Math.floor(rng.next() * closers.length)]! : ids[Math.floor(rng.next() * ids.length)]!;
      c.accept(id);
      out.push(id);
    }
    if (!c.complete) continue;
    completed++;
    const text = new TextDecoder().decode(Uint8Array.from(out.flatMap((id) => [...toks[id]!])));
    const parsed = JSON.parse(text);
    expect(typeof parsed === "object" && parsed !== null && !Array.isArray(parsed)).toBe(true);
  }
  expect(completed).toBeGreaterThan(150);
});

test("a token the mask did not allow breaks the constraint; special tokens never pass", () => {
  const toks = vocab(0);
  const v = createJsonVocab(256, (id) => toks[id]!, [0x7b]); // '{' made special: nothing can start
  const c = v.constraint();
  expect(c.allowed().reduce((a, b) => a + b, 0)).toBe(0); // nothing: no whitespace before the object either
  c.accept(0x41);
  expect([c.complete, c.failed]).toEqual([false, true]);
});

test("a mask over a 150,000-token vocabulary costs milliseconds, and states seen before are cached", () => {
  const toks = vocab(150_000 - 256, 3n);
  const v = createJsonVocab(toks.length, (id) => toks[id]!, []);
  const c = v.constraint();
  const text = enc.encode('{"name": "the value of the thing", "n": [1, 2');
  const byte = (b: number) => toks.findIndex((t) => t.length === 1 && t[0] === b);
  let worst = 0;
  for (const b of text) {
    const t0 = performance.now();
    c.allowed();
    worst = Math.max(worst, performance.now() - t0);
    c.accept(byte(b));
  }
  console.log(`json mask, 150k tokens: worst ${worst.toFixed(1)} ms per step over ${text.length} steps`);
  expect(worst).toBeLessThan(250);
});

test("the mask is exactly the tokens whose bytes the state accepts (the walk against trying every token)", () => {
  const toks = vocab(4000, 5n);
  const v = createJsonVocab(toks.length, (id) => toks[id]!, []);
  const schema = compileSchema({
    type: "object",
    properties: { pet: { anyOf: [{ type: "object", properties: { kind: { const: "cat" }, n: { type: "integer" } }, required: ["kind"] }, { type: "object", properties: { kind: { const: "dog" } } }, { type: "string" }] }, tags: { type: "array", items: { type: "string" } } },
    additionalProperties: { type: "number" },
  });
  const rng = createRng(11n);
  let compared = 0;
  for (const root of [undefined, schema]) {
    for (let walk = 0; walk < 12; walk++) {
      const c = v.constraint(root);
      let state = jsonStart(root ?? ANY_OBJECT);
      for (let step = 0; step < 40 && !c.complete; step++) {
        const m = c.allowed();
        const ids: number[] = [];
        for (let id = 0; id < toks.length; id++) {
          const ok = stepJsonBytes(state, toks[id]!) !== null;
          expect(m[id]).toBe(ok ? 1 : 0);
          if (ok) ids.push(id);
        }
        compared++;
        if (ids.length === 0) break;
        const id = ids[Math.floor(rng.next() * ids.length)]!;
        c.accept(id);
        state = stepJsonBytes(state, toks[id]!)!;
      }
    }
  }
  expect(compared).toBeGreaterThan(200);
});
