/**
 * A byte-at-a-time recognizer of JSON prefixes: whether the bytes so far can still be the start of one JSON object
 * (the top level must be an object, as OpenAI's `response_format: json_object` asks, opening the output: no
 * whitespace before it), and whether they already are a whole one. Strings take any byte but `"`, `\` and control characters, plus the standard escapes; bytes >= 0x80 are
 * taken as they come (the tokenizer's UTF-8). Whitespace between tokens is allowed, at most `maxWhitespace` bytes in
 * a row, so a model cannot stall in it. The state is a small value object: `step` returns a new state (or null when
 * the byte cannot follow), which makes trying a token's bytes from one state cheap. Pure.
 *
 * @example
 * let s: JsonState | null = JSON_START;
 * for (const b of new TextEncoder().encode('{"a": [1, true]}')) s = s && stepJson(s, b);
 * s?.done; // true
 */

/** What the parser expects next. */
const enum Want {
  Value, // a value (after ':' or ',' in an array, or '[')
  TopObject, // the top level: an object
  KeyOrEnd, // after '{': a key or '}'
  Key, // after ',' in an object
  Colon,
  CommaOrEnd, // after a value in a container
  ValueOrEnd, // after '[': a value or ']'
  Done,
}

/** What the lexer is inside of. */
const enum Lex {
  None,
  String,
  Escape,
  Unicode, // aux: hex digits still to come
  Number, // aux: NumState
  Literal, // aux: index into the literal, lit: which one
}

const enum Num {
  Minus, // after '-': a digit
  Zero, // after a leading 0: '.', 'e' or the end
  Int, // digits
  Dot, // after '.': a digit
  Frac,
  Exp, // after 'e': sign or digit
  ExpSign, // after the sign: a digit
  ExpDigits,
}

const LITERALS = ["true", "false", "null"];

export interface JsonState {
  /** Open containers, innermost last: "o" object, "a" array. */
  readonly stack: string;
  readonly want: Want;
  readonly lex: Lex;
  readonly aux: number;
  readonly lit: number;
  /** Whitespace bytes in a row so far. */
  readonly ws: number;
  /** The string being lexed is an object key (after it: ':'). */
  readonly key: boolean;
  /** A whole object has been read (only whitespace may follow). */
  readonly done: boolean;
}

export const MAX_WHITESPACE = 32;

export const JSON_START: JsonState = { stack: "", want: Want.TopObject, lex: Lex.None, aux: 0, lit: 0, ws: 0, key: false, done: false };

const isWs = (b: number) => b === 0x20 || b === 0x0a || b === 0x0d || b === 0x09;
const isDigit = (b: number) => b >= 0x30 && b <= 0x39;
const isHex = (b: number) => isDigit(b) || (b >= 0x61 && b <= 0x66) || (b >= 0x41 && b <= 0x46);

/** The state after a value ended (closing the container's expectation). */
function afterValue(s: JsonState): JsonState {
  if (s.stack === "") return { ...s, lex: Lex.None, want: Want.Done, done: true, ws: 0 };
  return { ...s, lex: Lex.None, want: Want.CommaOrEnd, ws: 0 };
}

function close(s: JsonState, b: number): JsonState | null {
  const top = s.stack[s.stack.length - 1];
  if ((b === 0x7d && top !== "o") || (b === 0x5d && top !== "a")) return null;
  return afterValue({ ...s, stack: s.stack.slice(0, -1) });
}

/** A value starting with byte b (the parser wants a value here). */
function startValue(s: JsonState, b: number): JsonState | null {
  if (b === 0x7b) return { ...s, stack: s.stack + "o", want: Want.KeyOrEnd, ws: 0 };
  if (b === 0x5b) return { ...s, stack: s.stack + "a", want: Want.ValueOrEnd, ws: 0 };
  if (b === 0x22) return { ...s, lex: Lex.String, key: false, ws: 0 };
  if (b === 0x2d) return { ...s, lex: Lex.Number, aux: Num.Minus, ws: 0 };
  if (b === 0x30) return { ...s, lex: Lex.Number, aux: Num.Zero, ws: 0 };
  if (isDigit(b)) return { ...s, lex: Lex.Number, aux: Num.Int, ws: 0 };
  for (let i = 0; i < LITERALS.length; i++) if (b === LITERALS[i]!.charCodeAt(0)) return { ...s, lex: Lex.Literal, lit: i, aux: 1, ws: 0 };
  return null;
}

/** Byte b outside any token (structure or whitespace). */
function structural(s: JsonState, b: number): JsonState | null {
  // no whitespace before the object (it opens the output) nor more than MAX_WHITESPACE in a row
  if (isWs(b)) return s.ws >= MAX_WHITESPACE || s.want === Want.TopObject ? null : { ...s, ws: s.ws + 1 };
  switch (s.want) {
    case Want.TopObject:
      return b === 0x7b ? { ...s, stack: "o", want: Want.KeyOrEnd, ws: 0 } : null;
    case Want.Value:
      return startValue(s, b);
    case Want.ValueOrEnd:
      return b === 0x5d ? close(s, b) : startValue(s, b);
    case Want.KeyOrEnd:
      if (b === 0x7d) return close(s, b);
      return b === 0x22 ? { ...s, lex: Lex.String, key: true, ws: 0 } : null;
    case Want.Key:
      return b === 0x22 ? { ...s, lex: Lex.String, key: true, ws: 0 } : null;
    case Want.Colon:
      return b === 0x3a ? { ...s, want: Want.Value, ws: 0 } : null;
    case Want.CommaOrEnd:
      if (b === 0x2c) return { ...s, want: s.stack.endsWith("o") ? Want.Key : Want.Value, ws: 0 };
      return b === 0x7d || b === 0x5d ? close(s, b) : null;
    case Want.Done:
      return null;
  }
}

/** The state after byte b, or null when no JSON object starts with the bytes so far and b. */
export function stepJson(s: JsonState, b: number): JsonState | null {
  switch (s.lex) {
    case Lex.None:
      return structural(s, b);
    case Lex.String:
      if (b === 0x22) return s.key ? { ...s, lex: Lex.None, want: Want.Colon, key: false } : afterValue(s);
      if (b === 0x5c) return { ...s, lex: Lex.Escape };
      return b < 0x20 ? null : s;
    case Lex.Escape:
      if (b === 0x75) return { ...s, lex: Lex.Unicode, aux: 4 };
      return b === 0x22 || b === 0x5c || b === 0x2f || b === 0x62 || b === 0x66 || b === 0x6e || b === 0x72 || b === 0x74 ? { ...s, lex: Lex.String } : null;
    case Lex.Unicode:
      if (!isHex(b)) return null;
      return s.aux === 1 ? { ...s, lex: Lex.String, aux: 0 } : { ...s, aux: s.aux - 1 };
    case Lex.Literal: {
      const word = LITERALS[s.lit]!;
      if (b !== word.charCodeAt(s.aux)) return null;
      return s.aux + 1 === word.length ? afterValue(s) : { ...s, aux: s.aux + 1 };
    }
    case Lex.Number:
      return number(s, b);
  }
}

function number(s: JsonState, b: number): JsonState | null {
  const to = (aux: Num) => (aux === s.aux ? s : { ...s, aux });
  switch (s.aux as Num) {
    case Num.Minus:
      return b === 0x30 ? to(Num.Zero) : isDigit(b) ? to(Num.Int) : null;
    case Num.Zero:
      if (b === 0x2e) return to(Num.Dot);
      if (b === 0x65 || b === 0x45) return to(Num.Exp);
      break;
    case Num.Int:
      if (isDigit(b)) return s;
      if (b === 0x2e) return to(Num.Dot);
      if (b === 0x65 || b === 0x45) return to(Num.Exp);
      break;
    case Num.Dot:
      return isDigit(b) ? to(Num.Frac) : null;
    case Num.Frac:
      if (isDigit(b)) return s;
      if (b === 0x65 || b === 0x45) return to(Num.Exp);
      break;
    case Num.Exp:
      return b === 0x2b || b === 0x2d ? to(Num.ExpSign) : isDigit(b) ? to(Num.ExpDigits) : null;
    case Num.ExpSign:
      return isDigit(b) ? to(Num.ExpDigits) : null;
    case Num.ExpDigits:
      if (isDigit(b)) return s;
      break;
  }
  // the number ended where it may (Zero, Int, Frac, ExpDigits): b is the next token's
  return structural(afterValue(s), b);
}

/** The state after all of `bytes`, or null. */
export function stepJsonBytes(s: JsonState, bytes: Uint8Array): JsonState | null {
  let cur: JsonState | null = s;
  for (let i = 0; i < bytes.length && cur; i++) cur = stepJson(cur, bytes[i]!);
  return cur;
}

/** A key for states that allow the same bytes next. */
export function stateKey(s: JsonState): string {
  return `${s.stack}|${s.want}|${s.lex}|${s.aux}|${s.lit}|${s.key ? 1 : 0}|${s.ws}`;
}

/** Inside a string, past any escape: every byte but `"`, `\` and control characters continues it. */
export function inPlainString(s: JsonState): boolean {
  return s.lex === Lex.String;
}
