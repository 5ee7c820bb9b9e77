/**
 * Prompt-lookup (n-gram) proposals for speculative decoding: if the last `n`
 * tokens occurred earlier in the sequence, propose the tokens that followed
 * them. Costs no model; pays off on repetitive text (code edits, quoting the
 * prompt). The engine verifies proposals in one step of k + 1 tokens.
 *
 * @example
 * proposeNgram([1, 2, 3, 9, 1, 2], 4); // [3, 9, 1, 2]
 */
export function proposeNgram(tokens: readonly number[], k: number, maxN = 3, minN = 1): number[] {
  const len = tokens.length;
  if (k <= 0) return [];
  for (let n = Math.min(maxN, len - 1); n >= minN; n--) {
    // Most recent earlier occurrence of the last n tokens.
    for (let i = len - n - 1; i >= 0; i--) {
      let match = true;
      for (let j = 0; j < n; j++) {
        if (tokens[i + j] !== tokens[len - n + j]) {
          match = false;
          break;
        }
      }
      if (match) return tokens.slice(i + n, Math.min(i + n + k, len)) as number[];
    }
  }
  return [];
}
