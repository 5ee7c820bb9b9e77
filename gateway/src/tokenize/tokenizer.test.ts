import { describe, expect, test } from "bun:test";
import { byteRanks, PATTERN, SPECIAL_TOKENS } from "../../test/fakes/test-model";
import { createUtf8Detokenizer } from "../openai/utf8-detokenizer";
import { createTokenizer } from "./tokenizer";

describe("tokenizer.tokenBytes", () => {
  const tok = createTokenizer({ ranks: byteRanks(), pattern: PATTERN, specialTokens: SPECIAL_TOKENS });

  test("ordinary ids are their bytes, special ids are empty", () => {
    expect([...tok.tokenBytes(104)]).toEqual([104]);
    expect(tok.tokenBytes(258).length).toBe(0);
    expect(tok.vocabSize).toBe(259);
  });

  test("ids past the tokenizer (a padded model vocabulary) are empty, not an exception", () => {
    // The H200 run's random Qwen3 model samples ids up to 151935 while its tokenizer ends at 151668;
    // each one failed the stream with a 500 and three of them ejected the only backend.
    for (const id of [259, 4095, 151_935, 2 ** 31, -1, 1.5]) expect(tok.tokenBytes(id).length).toBe(0);
    const d = createUtf8Detokenizer((id) => tok.tokenBytes(id));
    expect(d.push([104, 151_935, 105])).toBe("hi");
  });

  test("special tokens that are text (textTokenIds, e.g. <tool_call>) detokenize to their text", () => {
    const t = createTokenizer({ ranks: byteRanks(), pattern: PATTERN, specialTokens: { ...SPECIAL_TOKENS, "<tool_call>": 259 }, textTokenIds: [259] });
    expect(new TextDecoder().decode(t.tokenBytes(259))).toBe("<tool_call>");
    expect(t.tokenBytes(258).length).toBe(0); // <|im_end|>: control
    expect([...t.encode("<tool_call>")]).toEqual([259]);
  });

  test("a hole inside the vocabulary is empty too", () => {
    const holed = createTokenizer({ ranks: byteRanks(), pattern: PATTERN, specialTokens: { "<|end|>": 300 } });
    expect(holed.vocabSize).toBe(301);
    expect(holed.tokenBytes(280).length).toBe(0);
    expect([...holed.tokenBytes(65)]).toEqual([65]);
  });
});
