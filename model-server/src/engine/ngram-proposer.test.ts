import { expect, test } from "bun:test";
import { proposeNgram } from "./ngram-proposer";

test("proposes what followed the most recent earlier occurrence of the longest suffix", () => {
  expect(proposeNgram([1, 2, 3, 9, 1, 2], 4)).toEqual([3, 9, 1, 2]);
  expect(proposeNgram([1, 2, 3, 9, 1, 2], 2)).toEqual([3, 9]);
  expect(proposeNgram([5, 7, 5, 8, 5], 2)).toEqual([8, 5]);
  expect(proposeNgram([1, 2, 3], 3)).toEqual([]);
  expect(proposeNgram([1, 1], 0)).toEqual([]);
});
