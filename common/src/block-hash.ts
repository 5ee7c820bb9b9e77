/**
 * Chained block hashes: the identity of a KV-cache block across the fleet.
 *
 * A prompt is cut into full blocks of `blockSize` tokens. Block i's hash is
 * xxHash64 over its token ids (u32 little-endian) seeded with block i-1's hash;
 * block 0 is seeded with the root hash of the model id. So two equal hashes at
 * the same index mean the same model and the same tokens from position 0, and
 * the gateway (routing) and the model server (KV events) agree by construction.
 * A trailing partial block has no hash: it is never shared.
 *
 * @example
 * const root = rootHash("qwen3-moe-tiny");
 * const hashes = hashBlocks([1, 2, 3, ...], 16, root);
 */

const encoder = new TextEncoder();

/** The seed of block 0 for a model: xxHash64 of the model id's UTF-8 bytes. */
export function rootHash(modelId: string): bigint {
  return BigInt.asUintN(64, BigInt(Bun.hash.xxHash64(encoder.encode(modelId), 0n)));
}

/** Hash of one block of tokens given its parent's hash. */
export function hashBlock(parent: bigint, tokens: Uint32Array): bigint {
  const bytes = new Uint8Array(tokens.buffer, tokens.byteOffset, tokens.byteLength);
  return BigInt.asUintN(64, BigInt(Bun.hash.xxHash64(bytes, parent)));
}

/**
 * Hashes of every full block of `tokens`, in order. `maxBlocks` bounds the work
 * for callers that need only a prefix.
 */
export function hashBlocks(
  tokens: ArrayLike<number>,
  blockSize: number,
  root: bigint,
  maxBlocks = Number.POSITIVE_INFINITY,
): bigint[] {
  if (!Number.isInteger(blockSize) || blockSize <= 0) {
    throw new RangeError(`blockSize must be a positive integer, got ${blockSize}`);
  }
  const n = Math.min(Math.floor(tokens.length / blockSize), maxBlocks);
  const out: bigint[] = new Array(n);
  const block = new Uint32Array(blockSize);
  let parent = root;
  for (let b = 0; b < n; b++) {
    const base = b * blockSize;
    for (let j = 0; j < blockSize; j++) block[j] = tokens[base + j]!;
    parent = hashBlock(parent, block);
    out[b] = parent;
  }
  return out;
}
