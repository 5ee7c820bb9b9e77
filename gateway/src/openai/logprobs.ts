/**
 * OpenAI's `logprobs` objects from the model server's per-token log-probabilities: chat's
 * `{"content": [{token, logprob, bytes, top_logprobs: [{token, logprob, bytes}]}]}` and the legacy
 * completions' `{tokens, token_logprobs, top_logprobs: [{token: logprob}], text_offset}`. A token's
 * text is its bytes decoded as UTF-8 (a token holding part of a character shows U+FFFD there; its
 * `bytes` are exact). Pure but for the running text offset of the completions form.
 *
 * @example
 * const lp = createLogprobFormatter("chat", (id) => tokenizer.tokenBytes(id));
 * lp.value(step.logprobs); // { content: [...] }
 */
import type { TokenLogprob } from "../rpc/model-client";

const utf8 = new TextDecoder("utf-8", { fatal: false });

export interface LogprobFormatter {
  /** The `logprobs` value for these tokens (in order: the completions form counts text offsets across calls). */
  value(tokens: readonly TokenLogprob[]): object;
}

export function createLogprobFormatter(endpoint: "chat" | "completions", tokenBytes: (id: number) => Uint8Array): LogprobFormatter {
  const str = (id: number) => utf8.decode(tokenBytes(id));
  const text = (id: number) => {
    const b = tokenBytes(id);
    return { token: utf8.decode(b), bytes: Array.from(b) };
  };
  if (endpoint === "chat") {
    return {
      value(tokens) {
        const content = tokens.map((t) => ({
          ...withLogprob(text(t.tokenId), t.logprob),
          top_logprobs: t.top.map((a) => withLogprob(text(a.tokenId), a.logprob)),
        }));
        return { content };
      },
    };
  }
  let offset = 0; // characters of completion text before the next token
  return {
    value(tokens) {
      const out = { tokens: [] as string[], token_logprobs: [] as number[], top_logprobs: [] as Record<string, number>[], text_offset: [] as number[] };
      for (const t of tokens) {
        const s = str(t.tokenId);
        out.tokens.push(s);
        out.token_logprobs.push(t.logprob);
        out.top_logprobs.push(Object.fromEntries(t.top.map((a) => [str(a.tokenId), a.logprob])));
        out.text_offset.push(offset);
        offset += s.length;
      }
      return out;
    },
  };
}

/** { token, logprob, bytes } in OpenAI's key order. */
function withLogprob(t: { token: string; bytes: number[] }, logprob: number) {
  return { token: t.token, logprob, bytes: t.bytes };
}
