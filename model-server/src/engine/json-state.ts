/**
 * A byte-at-a-time recognizer of JSON prefixes under a schema (json-schema.ts): whether the bytes so far can still be
 * the start of one JSON object that fits it, and whether they already are a whole one. `response_format:
 * json_object` is the schema ANY_OBJECT (any object). The object opens the output (no whitespace before it);
 * whitespace between tokens is allowed, at most `MAX_WHITESPACE` bytes in a row, so a model cannot stall in it.
 * Strings take any byte but `"`, `\` and control characters, plus the standard escapes (bytes >= 0x80 as they come:
 * the tokenizer's UTF-8); a string with a fixed set of values (an object's key when its properties are fixed, an
 * enum) takes only bytes that keep it a prefix of one of them, and no escapes. An object closes only once its
 * required keys came, takes each key once, and a comma only while a key is left; an array keeps within its
 * minItems / maxItems; an integer takes no fraction or exponent. A union whose options can start alike (two object
 * shapes, as a pydantic Union gives) is followed along each of them at once: the state holds the alternatives still
 * alive (`alts`) until the bytes rule all but one out. The state is a small value object: `step` returns a new one (or
 * null when the byte cannot follow), so trying a token's bytes from one state is cheap. Pure.
 *
 * @example
 * let s: JsonState | null = jsonStart(ANY_OBJECT);
 * for (const b of new TextEncoder().encode('{"a": [1, true]}')) s = s && stepJson(s, b);
 * s?.done; // true
 */
import { ANY, ANY_OBJECT, type SchemaNode } from "./json-schema";

/** What the parser expects next. */
const enum Want {
  Value, // a value (after ':' or ',' in an array)
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
  Number, // aux: Num
  Literal, // text: the literal, aux: index into it
  NumberSet, // values: the numbers allowed (as written), text: the bytes so far
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

/** An open container: its schema, what it holds so far, and the container around it. */
interface Frame {
  readonly node: SchemaNode; // object or array (or any)
  readonly array: boolean;
  /** Object: keys seen, "\0"-joined; array: unused. */
  readonly used: string;
  /** Array: items so far. */
  readonly count: number;
  /** Object: the schema of the value after the current key. */
  readonly value: SchemaNode;
  readonly parent: Frame | null;
}

export interface JsonState {
  readonly top: Frame | null;
  readonly root: SchemaNode;
  readonly want: Want;
  readonly lex: Lex;
  readonly aux: number;
  /** Literal: the text being matched. Constrained string: its bytes so far (one char per byte). */
  readonly text: string;
  /** Constrained string: the values it may take (bytes, one char per byte); null: any string. */
  readonly values: readonly string[] | null;
  /** The number being lexed is an integer. */
  readonly integer: boolean;
  /** Whitespace bytes in a row so far. */
  readonly ws: number;
  /** The string being lexed is an object key (after it: ':'). */
  readonly key: boolean;
  /** A free key of an object with both properties and additional ones: its bytes are kept (`text`) to pick its schema. */
  readonly track: boolean;
  /** A whole object has been read (only whitespace may follow), and the text after it (`post`). */
  readonly done: boolean;
  /** Literal text before the object (bytes, one char per byte) and how much of it came. */
  readonly pre: string;
  readonly preAt: number;
  /** Literal text after the object, and how much of it came (once the object closed). */
  readonly post: string;
  readonly postAt: number;
  /**
   * A reasoning model's thinking before the object: 0 none (or over), 1 the output may open with `<think>`, 2 inside
   * it until `</think>`; `thinkAt`: how much of the marker came; `thought`: a block ended (whitespace may follow).
   */
  readonly think: 0 | 1 | 2;
  readonly thinkAt: number;
  readonly thought: boolean;
  /**
   * Several readings at once (a union's options that the bytes so far all fit): each alternative is a whole state;
   * the state's own fields are the first's, `done` is whether any is whole.
   */
  readonly alts?: readonly JsonState[];
}

/** The states still alive as one: none (null), one, or the alternatives (nested ones flattened, equal ones merged). */
function fork(list: readonly JsonState[]): JsonState | null {
  if (list.length <= 1 && !list[0]?.alts) return list[0] ?? null;
  const byKey = new Map<string, JsonState>();
  for (const s of list) for (const a of s.alts ?? [s]) byKey.set(stateKey(a), a);
  const alive = [...byKey.values()];
  if (alive.length <= 1) return alive[0] ?? null;
  return { ...alive[0]!, alts: alive, done: alive.some((a) => a.done) };
}

// two bytes between tokens (", " or a newline and a space), as constrained decoders commonly allow: a model that loves
// whitespace cannot spend its tokens there, and compact JSON is what the API answers anyway
export const MAX_WHITESPACE = 2;

/** Text as its UTF-8 bytes, one char per byte. */
const latin1 = (s: string) => String.fromCharCode(...new TextEncoder().encode(s));

/**
 * The state before the first byte, for a root object schema; `frame`: literal text around the object (a tool
 * call's tags: the output is then prefix + object + suffix, with no whitespace at either seam).
 */
export function jsonStart(root: SchemaNode, frame: { prefix?: string; suffix?: string; thinking?: "may" | "inside" } = {}): JsonState {
  const pre = latin1(frame.prefix ?? "");
  const post = latin1(frame.suffix ?? "");
  const think = frame.thinking === "inside" ? 2 : frame.thinking === "may" ? 1 : 0;
  return { top: null, root, want: Want.TopObject, lex: Lex.None, aux: 0, text: "", values: null, integer: false, ws: 0, key: false, track: false, done: false, pre, preAt: 0, post, postAt: 0, think, thinkAt: 0, thought: false };
}

const THINK_OPEN = "<think>";
const THINK_CLOSE = "</think>";

/** The thinking phases: `<think>` or the output itself, then any text up to `</think>`. */
function thinking(s: JsonState, b: number): JsonState | null {
  if (s.think === 1) {
    if (b === THINK_OPEN.charCodeAt(s.thinkAt)) {
      const at = s.thinkAt + 1;
      return at === THINK_OPEN.length ? { ...s, think: 2, thinkAt: 0 } : { ...s, thinkAt: at };
    }
    // a "<thi..." that turns into something else is neither thinking nor the object
    return s.thinkAt > 0 ? null : stepJson({ ...s, think: 0 }, b);
  }
  if (b === THINK_CLOSE.charCodeAt(s.thinkAt)) {
    const at = s.thinkAt + 1;
    return at === THINK_CLOSE.length ? { ...s, think: 0, thinkAt: 0, thought: true, ws: 0 } : { ...s, thinkAt: at };
  }
  const at = b === THINK_CLOSE.charCodeAt(0) ? 1 : 0;
  return at === s.thinkAt ? s : { ...s, thinkAt: at };
}

/** `response_format: json_object`: any object. */
export const JSON_START: JsonState = jsonStart(ANY_OBJECT);


const isWs = (b: number) => b === 0x20 || b === 0x0a || b === 0x0d || b === 0x09;
const isDigit = (b: number) => b >= 0x30 && b <= 0x39;
const isHex = (b: number) => isDigit(b) || (b >= 0x61 && b <= 0x66) || (b >= 0x41 && b <= 0x46);
const keysOf = (used: string) => (used === "" ? [] : used.split("\0"));

/** An object's keys that may still come (values as bytes), or null when any key may (additional properties). */
function keyChoices(f: Frame): string[] | null {
  const n = f.node;
  if (n.kind !== "object" || n.additional) return null;
  const used = new Set(keysOf(f.used));
  return [...n.props.keys()].filter((k) => !used.has(k)).map(latin1);
}

/** Whether the object may close: every required key came. */
function canClose(f: Frame): boolean {
  const n = f.node;
  if (n.kind !== "object") return true;
  if (n.required.size === 0) return true;
  const used = new Set(keysOf(f.used));
  for (const r of n.required) if (!used.has(r)) return false;
  return true;
}

/** Whether another key may come (a comma). */
function moreKeys(f: Frame): boolean {
  const c = keyChoices(f);
  return c === null || c.length > 0;
}

/** The schema of an array's items or an object's current value. */
const childOf = (f: Frame): SchemaNode => (f.array ? (f.node.kind === "array" ? f.node.items : ANY) : f.value);

/** The state after a value ended (closing the container's expectation). */
function afterValue(s: JsonState): JsonState {
  const f = s.top;
  const base = { ...s, lex: Lex.None, ws: 0, text: "", values: null, integer: false };
  if (!f) return { ...base, want: Want.Done, done: s.post.length === 0 };
  return { ...base, want: Want.CommaOrEnd, top: f.array ? { ...f, count: f.count + 1 } : f };
}

function close(s: JsonState, b: number): JsonState | null {
  const f = s.top;
  if (!f || (b === 0x7d) === f.array) return null;
  if (f.array ? f.node.kind === "array" && f.count < f.node.min : !canClose(f)) return null;
  return afterValue({ ...s, top: f.parent });
}

function open(s: JsonState, node: SchemaNode, array: boolean): JsonState {
  const frame: Frame = { node, array, used: "", count: 0, value: ANY, parent: s.top };
  return { ...s, top: frame, want: array ? Want.ValueOrEnd : Want.KeyOrEnd, ws: 0 };
}

/** A string starting: constrained to `values` (bytes) or free. */
const startString = (s: JsonState, key: boolean, values: readonly string[] | null): JsonState => {
  const n = s.top?.node;
  const track = key && values === null && n?.kind === "object" && n.props.size > 0;
  return { ...s, lex: Lex.String, key, track, values, text: "", ws: 0 };
};

/** Unions inside unions (through `$ref`s) followed this deep at most: a union that contains itself ends there. */
const MAX_UNION_DEPTH = 16;

/** A value of schema `node` starting with byte b. */
function startValue(s: JsonState, b: number, node: SchemaNode, depth = 0): JsonState | null {
  switch (node.kind) {
    case "union": {
      if (depth >= MAX_UNION_DEPTH) return null;
      // every option the byte can start: more than one is followed along each (fork)
      const found: JsonState[] = [];
      for (const o of node.options) {
        const r = startValue(s, b, o, depth + 1);
        if (r) found.push(r);
      }
      return fork(found);
    }
    case "object":
      return b === 0x7b ? open(s, node, false) : null;
    case "array":
      return b === 0x5b && node.max > 0 ? open(s, node, true) : null;
    case "string":
      return b === 0x22 ? startString(s, false, node.values ? node.values.map(latin1) : null) : null;
    case "number":
      if (b === 0x2d) return { ...s, lex: Lex.Number, aux: Num.Minus, integer: node.integer, ws: 0 };
      if (b === 0x30) return { ...s, lex: Lex.Number, aux: Num.Zero, integer: node.integer, ws: 0 };
      return isDigit(b) ? { ...s, lex: Lex.Number, aux: Num.Int, integer: node.integer, ws: 0 } : null;
    case "literal":
      return b === node.text.charCodeAt(0) ? { ...s, lex: Lex.Literal, text: node.text, aux: 1, ws: 0 } : null;
    case "numbers": {
      const text = String.fromCharCode(b);
      return node.values.some((v) => v.startsWith(text)) ? { ...s, lex: Lex.NumberSet, values: node.values, text, ws: 0 } : null;
    }
    case "any":
      if (b === 0x7b) return open(s, ANY_OBJECT, false);
      if (b === 0x5b) return open(s, { kind: "array", id: 0, items: ANY, min: 0, max: Number.POSITIVE_INFINITY }, true);
      if (b === 0x22) return startString(s, false, null);
      for (const text of ["true", "false", "null"]) if (b === text.charCodeAt(0)) return { ...s, lex: Lex.Literal, text, aux: 1, ws: 0 };
      return startValue(s, b, { kind: "number", id: 0, integer: false });
  }
}

/** Byte b outside any token (structure or whitespace). */
function structural(s: JsonState, b: number): JsonState | null {
  // no whitespace before the object (it opens the output) nor more than MAX_WHITESPACE in a row
  if (isWs(b)) return s.ws >= MAX_WHITESPACE || s.want === Want.TopObject ? null : { ...s, ws: s.ws + 1 };
  const f = s.top;
  switch (s.want) {
    case Want.TopObject:
      // the root is an object, or a union of object shapes (startValue follows each)
      return b === 0x7b ? startValue(s, b, s.root) : null;
    case Want.Value:
      return startValue(s, b, childOf(f!));
    case Want.ValueOrEnd:
      if (b === 0x5d) return close(s, b);
      return f!.node.kind === "array" && f!.count >= f!.node.max ? null : startValue(s, b, childOf(f!));
    case Want.KeyOrEnd:
      if (b === 0x7d) return close(s, b);
      return b === 0x22 && moreKeys(f!) ? startString(s, true, keyChoices(f!)) : null;
    case Want.Key:
      return b === 0x22 ? startString(s, true, keyChoices(f!)) : null;
    case Want.Colon:
      return b === 0x3a ? { ...s, want: Want.Value, ws: 0 } : null;
    case Want.CommaOrEnd:
      if (b === 0x2c) {
        if (f!.array) return f!.node.kind === "array" && f!.count >= f!.node.max ? null : { ...s, want: Want.Value, ws: 0 };
        return moreKeys(f!) ? { ...s, want: Want.Key, ws: 0 } : null;
      }
      return b === 0x7d || b === 0x5d ? close(s, b) : null;
    case Want.Done:
      return null;
  }
}

/** The end of a string: a key names its value's schema; a constrained string must be one of its values. */
function endString(s: JsonState): JsonState | null {
  if (s.values && !s.values.includes(s.text)) return null;
  if (!s.key) return afterValue(s);
  const f = s.top!;
  const name = s.values || s.track ? new TextDecoder().decode(Uint8Array.from(s.text, (c) => c.charCodeAt(0))) : null;
  const n = f.node;
  const value = name !== null && n.kind === "object" ? (n.props.get(name) ?? n.additional ?? ANY) : n.kind === "object" ? (n.additional ?? ANY) : ANY;
  const used = name === null ? f.used : f.used === "" ? name : `${f.used}\0${name}`;
  return { ...s, lex: Lex.None, want: Want.Colon, key: false, track: false, values: null, text: "", top: { ...f, used, value } };
}

/** The state after byte b, or null when no JSON object of the schema starts with the bytes so far and b. */
export function stepJson(s: JsonState, b: number): JsonState | null {
  if (s.alts) return fork(s.alts.map((a) => stepJson(a, b)).filter((a): a is JsonState => a !== null));
  if (s.think !== 0) return thinking(s, b);
  // whitespace between the thinking and what follows it
  if (s.thought && s.want === Want.TopObject && s.preAt === 0 && isWs(b)) return s.ws >= MAX_WHITESPACE ? null : { ...s, ws: s.ws + 1 };
  // the literal text around the object, byte by byte
  if (s.preAt < s.pre.length) return b === s.pre.charCodeAt(s.preAt) ? { ...s, preAt: s.preAt + 1, ws: 0 } : null;
  if (s.want === Want.Done && s.post.length > 0) {
    if (s.postAt >= s.post.length || b !== s.post.charCodeAt(s.postAt)) return null;
    return { ...s, postAt: s.postAt + 1, done: s.postAt + 1 === s.post.length };
  }
  switch (s.lex) {
    case Lex.None:
      return structural(s, b);
    case Lex.String: {
      if (b === 0x22) return endString(s);
      if (s.values) {
        if (b === 0x5c || b < 0x20) return null; // no escapes in a string of fixed values
        const text = s.text + String.fromCharCode(b);
        return s.values.some((v) => v.startsWith(text)) ? { ...s, text } : null;
      }
      if (b < 0x20) return null;
      const t = s.track ? { ...s, text: s.text + String.fromCharCode(b) } : s;
      return b === 0x5c ? { ...t, lex: Lex.Escape } : t;
    }
    case Lex.Escape: {
      // a tracked key keeps its escapes as written (such a key then names no property: the additional schema)
      const t = s.track ? { ...s, text: s.text + String.fromCharCode(b) } : s;
      if (b === 0x75) return { ...t, lex: Lex.Unicode, aux: 4 };
      return b === 0x22 || b === 0x5c || b === 0x2f || b === 0x62 || b === 0x66 || b === 0x6e || b === 0x72 || b === 0x74 ? { ...t, lex: Lex.String } : null;
    }
    case Lex.Unicode: {
      if (!isHex(b)) return null;
      const t = s.track ? { ...s, text: s.text + String.fromCharCode(b) } : s;
      return s.aux === 1 ? { ...t, lex: Lex.String, aux: 0 } : { ...t, aux: s.aux - 1 };
    }
    case Lex.Literal:
      if (b !== s.text.charCodeAt(s.aux)) return null;
      return s.aux + 1 === s.text.length ? afterValue(s) : { ...s, aux: s.aux + 1 };
    case Lex.Number:
      return number(s, b);
    case Lex.NumberSet: {
      const text = s.text + String.fromCharCode(b);
      if (s.values!.some((v) => v.startsWith(text))) return { ...s, text };
      // the number ends here only as one of the values; b is the next token's
      return s.values!.includes(s.text) ? structural(afterValue(s), b) : null;
    }
  }
}

function number(s: JsonState, b: number): JsonState | null {
  const to = (aux: Num) => (aux === s.aux ? s : { ...s, aux });
  const frac = !s.integer;
  switch (s.aux as Num) {
    case Num.Minus:
      return b === 0x30 ? to(Num.Zero) : isDigit(b) ? to(Num.Int) : null;
    case Num.Zero:
      if (frac && b === 0x2e) return to(Num.Dot);
      if (frac && (b === 0x65 || b === 0x45)) return to(Num.Exp);
      break;
    case Num.Int:
      if (isDigit(b)) return s;
      if (frac && b === 0x2e) return to(Num.Dot);
      if (frac && (b === 0x65 || b === 0x45)) return to(Num.Exp);
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

/** A key for states that allow the same bytes next (the open containers included: a token can close several). */
export function stateKey(s: JsonState): string {
  if (s.alts) return s.alts.map(stateKey).sort().join("||");
  let frames = "";
  for (let f = s.top; f; f = f.parent) frames += `${f.node.id}:${f.array ? f.count : f.used}:${f.value.id}/`;
  const strings = s.values ? s.values.join("\u0001") : "*";
  return `${s.root.id}|${frames}|${s.want}|${s.lex}|${s.aux}|${s.text}|${strings}|${s.integer ? 1 : 0}|${s.key ? 1 : 0}${s.track ? 1 : 0}|${s.ws}|${s.pre}|${s.preAt}|${s.post}|${s.postAt}|${s.think}|${s.thinkAt}|${s.thought ? 1 : 0}`;
}

/** Inside a free string, past any escape: every byte but `"`, `\` and control characters continues it. */
export function inPlainString(s: JsonState): boolean {
  if (s.alts) return s.alts.every(inPlainString);
  return s.lex === Lex.String && s.values === null;
}
