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

/**
 * ChatML with Hermes-style tools (the format Qwen2.5 and Qwen3 templates use): the tools' signatures in the system
 * turn inside <tools></tools>, calls as <tool_call>{"name": ..., "arguments": ...}</tool_call>, tool results as
 * <tool_response> in a user turn.
 */
export const CHATML_TOOLS =
  "{%- if tools %}<|im_start|>system\n{% if messages[0].role == 'system' %}{{ messages[0].content }}\n\n{% endif %}" +
  "# Tools\n\nYou may call functions. Their signatures:\n<tools>{% for tool in tools %}\n{{ tool | tojson }}{% endfor %}\n</tools>\n\n" +
  'Answer a call as <tool_call>\n{"name": <name>, "arguments": <object>}\n</tool_call><|im_end|>\n' +
  "{%- elif messages[0].role == 'system' %}<|im_start|>system\n{{ messages[0].content }}<|im_end|>\n{%- endif %}" +
  "{%- for message in messages %}{%- if message.role == 'system' %}" +
  "{%- elif message.role == 'assistant' and message.tool_calls %}<|im_start|>assistant\n{{ message.content }}" +
  '{%- for tc in message.tool_calls %}\n<tool_call>\n{"name": "{{ tc.function.name }}", "arguments": {{ tc.function.arguments }}}\n</tool_call>{%- endfor %}<|im_end|>\n' +
  "{%- elif message.role == 'tool' %}<|im_start|>user\n<tool_response>\n{{ message.content }}\n</tool_response><|im_end|>\n" +
  "{%- else %}<|im_start|>{{ message.role }}\n{{ message.content }}<|im_end|>\n{%- endif %}{%- endfor %}" +
  "{%- if add_generation_prompt %}<|im_start|>assistant\n{%- endif %}";

/** ChatML for a reasoning model, the way Qwen3's template treats thinking: `enable_thinking: false` closes an empty block. */
export const CHATML_THINKING =
  "{% for m in messages %}{{ '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}{% endfor %}" +
  "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% if enable_thinking is defined and enable_thinking is false %}{{ '<think>\\n\\n</think>\\n\\n' }}{% endif %}{% endif %}";

/** A template that opens the thinking block itself (as DeepSeek-R1's does): the generation starts inside it. */
export const CHATML_OPEN_THINKING =
  "{% for m in messages %}{{ '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}{% endfor %}" +
  "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n<think>\\n' }}{% endif %}{# ends with </think> #}";
