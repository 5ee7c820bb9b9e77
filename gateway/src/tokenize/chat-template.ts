/**
 * Renders a model's Hugging Face chat template (Jinja) with
 * @huggingface/jinja. The template is parsed once per model; rendering
 * passes the same variables transformers does (`messages`, `tools`,
 * `add_generation_prompt`, `bos_token`, `eos_token`).
 *
 * @example
 * const t = createChatTemplate(info.chatTemplate, { bosToken: "", eosToken: "<|im_end|>" });
 * t.render([{ role: "user", content: "hi" }]);
 */
import { Template } from "@huggingface/jinja";
import { badRequest } from "../errors";
import type { ChatMessage } from "../openai/request";

export interface ChatTemplate {
  render(messages: readonly ChatMessage[], tools?: readonly unknown[]): string;
}

export function createChatTemplate(source: string, tokens: { bosToken: string; eosToken: string }): ChatTemplate {
  const template = new Template(source);
  return {
    render(messages, tools) {
      try {
        return template.render({
          messages,
          tools,
          add_generation_prompt: true,
          bos_token: tokens.bosToken,
          eos_token: tokens.eosToken,
        });
      } catch (err) {
        // Templates raise_exception() on inputs they do not accept (e.g. role order).
        throw badRequest(`The model's chat template rejected the messages: ${(err as Error).message}`, "messages");
      }
    },
  };
}
