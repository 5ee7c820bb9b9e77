/**
 * The chat template and its tokens from `tokenizer_config.json`: the Jinja
 * template (a string, or the "default" of a named list), bos/eos tokens (a
 * string or an AddedToken object). `renderChat` renders it with
 * @huggingface/jinja, as the gateway does.
 *
 * @example
 *   const chat = loadChatTemplate(dir);
 *   renderChat(chat, [{ role: "user", content: "hi" }], true);
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { Template } from "@huggingface/jinja";
import { ModelLoadError } from "../loader/errors";

export interface ChatTemplate {
  /** Jinja source; empty when the model has none. */
  template: string;
  bosToken: string;
  eosToken: string;
}

export interface ChatMessage {
  role: string;
  content: string;
}

function tokenText(v: unknown): string {
  if (typeof v === "string") return v;
  if (v && typeof v === "object" && typeof (v as { content?: unknown }).content === "string") return (v as { content: string }).content;
  return "";
}

export function loadChatTemplate(dir: string): ChatTemplate {
  const file = join(dir, "tokenizer_config.json");
  if (!existsSync(file)) return { template: "", bosToken: "", eosToken: "" };
  let cfg: Record<string, unknown>;
  try {
    cfg = JSON.parse(readFileSync(file, "utf8"));
  } catch {
    throw new ModelLoadError("bad_file", `${file} is not valid JSON`);
  }
  let template = "";
  const t = cfg.chat_template;
  if (typeof t === "string") template = t;
  else if (Array.isArray(t)) template = (t.find((x) => x?.name === "default") ?? t[0])?.template ?? "";
  if (!template && existsSync(join(dir, "chat_template.jinja"))) template = readFileSync(join(dir, "chat_template.jinja"), "utf8");
  return { template, bosToken: tokenText(cfg.bos_token), eosToken: tokenText(cfg.eos_token) };
}

export function renderChat(chat: ChatTemplate, messages: ChatMessage[], addGenerationPrompt: boolean): string {
  if (!chat.template) throw new Error("this model has no chat template");
  return new Template(chat.template).render({
    messages,
    add_generation_prompt: addGenerationPrompt,
    bos_token: chat.bosToken,
    eos_token: chat.eosToken,
  });
}
