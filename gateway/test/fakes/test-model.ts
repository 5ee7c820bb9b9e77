/**
 * A tiny byte-level tokenizer and ChatML template for tests: every byte is
 * one token (ids 0-255), so multi-byte characters always span tokens and any
 * stop string longer than one byte spans token boundaries. Special tokens:
 * <|endoftext|> 256, <|im_start|> 257, <|im_end|> 258.
 */
export const SPECIAL_TOKENS: Record<string, number> = { "<|endoftext|>": 256, "<|im_start|>": 257, "<|im_end|>": 258 };
export const EOS_ID = 258;
export const PATTERN = "\\S+|\\s+";
export const CHATML =
  "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}" +
  "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

export function byteRanks(): string {
  let out = "";
  for (let i = 0; i < 256; i++) out += `${Buffer.from([i]).toString("base64")} ${i}\n`;
  return out;
}

/** Token ids for text under this tokenizer (no special tokens). */
export function encodeBytes(text: string): number[] {
  return [...new TextEncoder().encode(text)];
}
