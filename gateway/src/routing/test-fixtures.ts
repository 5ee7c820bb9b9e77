/** Shared builders for the policy tests (not a test file itself). */
import type { BackendView, RouteRequest } from "./policy";

export function request(over: Partial<RouteRequest> = {}): RouteRequest {
  const blocks = over.blockHashes ?? Array.from({ length: 8 }, (_, i) => BigInt(1000 + i));
  return { blockHashes: blocks, promptTokens: blocks.length * 16 + 5, blockSize: 16, ...over };
}

export function backend(id: string, over: Partial<BackendView> = {}, load: Partial<NonNullable<BackendView["load"]>> = {}): BackendView {
  return {
    id,
    outstanding: 0,
    matchedBlocks: 0,
    load: { running: 0, waiting: 0, queuedPrefillTokens: 0, kvBlocksUsed: 0, kvBlocksTotal: 1000, ...load },
    ...over,
  };
}
