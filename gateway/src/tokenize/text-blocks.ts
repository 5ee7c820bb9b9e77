/**
 * Routing keys for backends whose tokenizer the gateway does not know
 * (OpenAI-HTTP servers such as vLLM or SGLang): the prompt as the client sent
 * it is cut into fixed-size byte blocks and chain-hashed like token blocks
 * (`common/src/block-hash.ts`), so two prompts sharing a leading text share
 * leading block hashes. The router's approximate index for those backends
 * holds exactly these hashes (what this gateway, or a replica, routed there),
 * so they never need to agree with the server's own token blocks.
 *
 * Token counts are estimated at 4 bytes per token, so one 64-byte block
 * stands for one 16-token block in the cost model's prefill arithmetic.
 *
 * @example
 * const r = textRouteKey(req); // { blockHashes, promptTokens, blockSize: 16 }
 */
import { hashBlock, hashBlocks, rootHash } from "@dispatch/common/src/block-hash";
import type { GenerationRequest } from "../openai/request";

/** Bytes per text block. */
export const TEXT_BLOCK_BYTES = 64;
/** The token count one text block stands for (TEXT_BLOCK_BYTES / 4 bytes per token). */
export const TEXT_BLOCK_TOKENS = 16;
const BYTES_PER_TOKEN = TEXT_BLOCK_BYTES / TEXT_BLOCK_TOKENS;

const encoder = new TextEncoder();

export interface TextRouteKey {
  blockHashes: bigint[];
  promptTokens: number;
  blockSize: number;
}

/**
 * The prompt as one text: chat messages as `role\ncontent\0` in order (what
 * any chat template renders in that order, so a shared conversation head is a
 * shared text head), a completion prompt as given.
 */
export function promptText(req: GenerationRequest): string {
  if (req.endpoint === "chat") return (req.messages ?? []).map((m) => `${m.role}\n${m.content}\0`).join("");
  return typeof req.prompt === "string" ? req.prompt : "";
}

/** Root hashes per `text:`/`ids:` model key: the same few models on every request (bounded all the same). */
const roots = new Map<string, bigint>();
const MAX_ROOTS = 256;
function cachedRoot(key: string): bigint {
  let r = roots.get(key);
  if (r === undefined) {
    if (roots.size >= MAX_ROOTS) roots.clear();
    roots.set(key, (r = rootHash(key)));
  }
  return r;
}

/**
 * `hashBlocks(bytes, TEXT_BLOCK_BYTES, root)` exactly (each byte widened to a
 * uint32, chained), with the widening done by one typed-array copy per block
 * instead of a per-byte loop: the same hashes, so indexes and replicas agree.
 */
function hashTextBlocks(bytes: Uint8Array, root: bigint): bigint[] {
  const n = Math.floor(bytes.length / TEXT_BLOCK_BYTES);
  const out: bigint[] = new Array(n);
  const block = new Uint32Array(TEXT_BLOCK_BYTES);
  let parent = root;
  for (let b = 0; b < n; b++) {
    block.set(bytes.subarray(b * TEXT_BLOCK_BYTES, (b + 1) * TEXT_BLOCK_BYTES));
    parent = hashBlock(parent, block);
    out[b] = parent;
  }
  return out;
}

export function textRouteKey(req: GenerationRequest): TextRouteKey {
  // A completion prompt given as token ids: hash the ids themselves (their tokenizer is the server's).
  if (req.endpoint === "completions" && Array.isArray(req.prompt)) {
    const ids = req.prompt;
    return { blockHashes: hashBlocks(ids, TEXT_BLOCK_TOKENS, cachedRoot(`ids:${req.model}`)), promptTokens: ids.length, blockSize: TEXT_BLOCK_TOKENS };
  }
  const bytes = encoder.encode(promptText(req));
  return {
    blockHashes: hashTextBlocks(bytes, cachedRoot(`text:${req.model}`)),
    promptTokens: Math.ceil(bytes.length / BYTES_PER_TOKEN),
    blockSize: TEXT_BLOCK_TOKENS,
  };
}
