/**
 * Renders a model's Hugging Face chat template (Jinja) with
 * @huggingface/jinja. The template is parsed once per model; rendering
 * passes the same variables transformers does (`messages`, `tools`,
 * `add_generation_prompt`, `bos_token`, `eos_token`), and the request's
 * `chat_template_kwargs` (vLLM's extension, e.g. Qwen3's `enable_thinking`).
 * `continue_final_message` renders the last (assistant) message open, so the
 * model continues it instead of starting a new turn, as transformers does:
 * the text is cut where that message's content ends.
 *
 * @example
 * const t = createChatTemplate(info.chatTemplate, { bosToken: "", eosToken: "<|im_end|>" });
 * t.render([{ role: "user", content: "hi" }]);
 */
import { Template } from "@huggingface/jinja";
import { badRequest } from "../errors";
import type { ChatMessage } from "../openai/request";

export interface RenderOptions {
  /** Extra template variables; the standard ones above take precedence over them. */
  kwargs?: Record<string, unknown>;
  /** Default true (false when continuing the final message). */
  addGenerationPrompt?: boolean;
  continueFinalMessage?: boolean;
}

export interface ChatTemplate {
  render(messages: readonly ChatMessage[], tools?: readonly unknown[], options?: RenderOptions): string;
}

export function createChatTemplate(source: string, tokens: { bosToken: string; eosToken: string }): ChatTemplate {
  const template = new Template(source);
  return {
    render(messages, tools, o = {}) {
      const cont = o.continueFinalMessage === true;
      let text: string;
      try {
        text = template.render({
          ...o.kwargs,
          messages,
          tools,
          add_generation_prompt: cont ? false : (o.addGenerationPrompt ?? true),
          bos_token: tokens.bosToken,
          eos_token: tokens.eosToken,
        });
      } catch (err) {
        // Templates raise_exception() on inputs they do not accept (e.g. role order).
        throw badRequest(`The model's chat template rejected the messages: ${(err as Error).message}`, "messages");
      }
      if (!cont) return text;
      const last = messages.at(-1)!.content;
      const at = last === "" ? -1 : text.lastIndexOf(last);
      if (at < 0) throw badRequest("'continue_final_message': the template does not render the final message's content as given.", "continue_final_message");
      return text.slice(0, at + last.length);
    },
  };
}
