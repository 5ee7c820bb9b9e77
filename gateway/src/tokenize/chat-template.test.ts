import { expect, test } from "bun:test";
import { GatewayError } from "../errors";
import { parseChatRequest } from "../openai/parse-chat";
import { createChatTemplate } from "./chat-template";

// ChatML with a thinking switch, the way Qwen3's template reads `enable_thinking`
const source =
  "{% for m in messages %}{{ '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}{% endfor %}" +
  "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% if enable_thinking is defined and enable_thinking is false %}{{ '<think>\\n\\n</think>\\n\\n' }}{% endif %}{% endif %}";
const t = createChatTemplate(source, { bosToken: "", eosToken: "<|im_end|>" });
const user = { role: "user" as const, content: "hi" };

test("the standard variables, and chat_template_kwargs as extra ones", () => {
  expect(t.render([user])).toBe("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
  expect(t.render([user], undefined, { kwargs: { enable_thinking: false } })).toBe("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
  expect(t.render([user], undefined, { addGenerationPrompt: false })).toBe("<|im_start|>user\nhi<|im_end|>\n");
  // kwargs cannot replace the request's own messages
  expect(t.render([user], undefined, { kwargs: { messages: [] } })).toContain("hi");
});

test("continue_final_message: the last assistant message stays open for the model to go on", () => {
  const msgs = [user, { role: "assistant" as const, content: "Once upon a" }];
  expect(t.render(msgs, undefined, { continueFinalMessage: true })).toBe("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\nOnce upon a");
});

test("the request fields: parsed, and refused where they cannot work", () => {
  const chat = (o: Record<string, unknown>, messages: unknown[] = [user]) => parseChatRequest(JSON.stringify({ model: "m", messages, ...o }));
  expect(chat({ chat_template_kwargs: { enable_thinking: false } }).templateKwargs).toEqual({ enable_thinking: false });
  expect(chat({ add_generation_prompt: false }).addGenerationPrompt).toBe(false);
  expect(chat({ continue_final_message: true }, [user, { role: "assistant", content: "x" }]).continueFinalMessage).toBe(true);
  for (const [o, msgs] of [
    [{ chat_template_kwargs: "enable_thinking" }, [user]],
    [{ continue_final_message: true }, [user]],
    [{ continue_final_message: true, add_generation_prompt: true }, [user, { role: "assistant", content: "x" }]],
  ] as const) {
    expect(() => chat(o, [...msgs])).toThrow(GatewayError);
  }
});
