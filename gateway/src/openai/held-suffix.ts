/**
 * How much of a text's end must wait because it could be the start of a marker (a tag the parsers look for, such
 * as `<tool_call>` or `</think>`): the length of the longest suffix of `s` that is a proper prefix of `marker`.
 *
 * @example
 * heldSuffix("a <too", "<tool_call>"); // 4: "<too" may still become the marker
 */
export function heldSuffix(s: string, marker: string): number {
  for (let n = Math.min(s.length, marker.length - 1); n > 0; n--) if (marker.startsWith(s.slice(s.length - n))) return n;
  return 0;
}
