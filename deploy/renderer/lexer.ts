/**
 * Lexer for the Go-template subset the dispatch chart uses. It splits a
 * template into text and actions (`{{ ... }}`), applies the trim markers
 * (`{{-` eats whitespace before, `-}}` after), drops comments, and tokenizes
 * the inside of each action. Anything it does not recognise is an error with
 * the template name and line, never a silent pass-through.
 */
import { TemplateError } from "./errors";

export type Token =
  | { kind: "ident"; value: string }
  | { kind: "field"; value: string[] } // `.A.B` -> ["A", "B"]; `.` -> []
  | { kind: "var"; name: string; fields: string[] } // `$x.A` -> {name: "x", fields: ["A"]}; `$` -> name ""
  | { kind: "string"; value: string }
  | { kind: "number"; value: number | bigint } // integer literals are Go ints (bigint), others float64
  | { kind: "bool"; value: boolean }
  | { kind: "nil" }
  | { kind: "pipe" }
  | { kind: "lparen" }
  | { kind: "rparen" }
  | { kind: "declare" } // :=
  | { kind: "assign" } // =
  | { kind: "comma" }
  | { kind: "chain"; value: string[] }; // `.A.B` right after `)`

export type Piece = { kind: "text"; text: string } | { kind: "action"; tokens: Token[]; line: number };

const IDENT = /^[A-Za-z_][A-Za-z0-9_]*/;
const NUMBER = /^-?(?:0x[0-9a-fA-F]+|\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)/;

/** Splits `source` into text and tokenized actions. `name` is used in errors. */
export function lex(source: string, name: string): Piece[] {
  const pieces: Piece[] = [];
  let pos = 0;
  let trimNext = false;
  while (pos < source.length) {
    const open = source.indexOf("{{", pos);
    let text = open < 0 ? source.slice(pos) : source.slice(pos, open);
    if (trimNext) text = text.replace(/^\s+/, "");
    trimNext = false;
    if (open < 0) {
      if (text) pieces.push({ kind: "text", text });
      break;
    }
    const line = source.slice(0, open).split("\n").length;
    let start = open + 2;
    if (/^-[ \t\r\n]/.test(source.slice(start, start + 2))) {
      text = text.replace(/\s+$/, "");
      start += 1;
    }
    if (text) pieces.push({ kind: "text", text });
    const { tokens, end, trimAfter } = lexAction(source, start, name, line);
    trimNext = trimAfter;
    pos = end;
    if (tokens) pieces.push({ kind: "action", tokens, line });
  }
  return pieces;
}

function lexAction(src: string, start: number, name: string, line: number) {
  const fail = (msg: string): never => {
    throw new TemplateError(`${name}:${line}: ${msg}`);
  };
  let i = start;
  while (/[ \t\r\n]/.test(src[i] ?? "")) i++;
  if (src.startsWith("/*", i)) {
    const close = src.indexOf("*/", i + 2);
    if (close < 0) fail("unclosed comment");
    let j = close + 2;
    while (/[ \t\r\n]/.test(src[j] ?? "")) j++;
    if (src.startsWith("-}}", j)) return { tokens: undefined, end: j + 3, trimAfter: true };
    if (src.startsWith("}}", j)) return { tokens: undefined, end: j + 2, trimAfter: false };
    fail("a comment must be the whole action");
  }
  const tokens: Token[] = [];
  for (;;) {
    while (/[ \t\r\n]/.test(src[i] ?? "")) i++;
    if (i >= src.length) fail("unclosed action");
    if (src.startsWith("-}}", i) && /[ \t\r\n]/.test(src[i - 1] ?? "")) return { tokens, end: i + 3, trimAfter: true };
    if (src.startsWith("}}", i)) return { tokens, end: i + 2, trimAfter: false };
    const rest = src.slice(i, i + 200);
    const c = src[i]!;
    if (c === "|") (tokens.push({ kind: "pipe" }), i++);
    else if (c === "(") (tokens.push({ kind: "lparen" }), i++);
    else if (c === ")") (tokens.push({ kind: "rparen" }), i++);
    else if (c === ",") (tokens.push({ kind: "comma" }), i++);
    else if (rest.startsWith(":=")) (tokens.push({ kind: "declare" }), (i += 2));
    else if (c === "=") (tokens.push({ kind: "assign" }), i++);
    else if (c === '"') {
      let j = i + 1;
      let out = "";
      while (j < src.length && src[j] !== '"') {
        if (src[j] === "\n") fail("newline in string");
        if (src[j] === "\\") {
          const e = src[j + 1];
          const map: Record<string, string> = { n: "\n", t: "\t", '"': '"', "\\": "\\" };
          if (e === undefined || !(e in map)) fail(`unsupported escape \\${e}`);
          out += map[e!];
          j += 2;
        } else out += src[j++];
      }
      if (src[j] !== '"') fail("unclosed string");
      tokens.push({ kind: "string", value: out });
      i = j + 1;
    } else if (c === "`") {
      const close = src.indexOf("`", i + 1);
      if (close < 0) fail("unclosed raw string");
      tokens.push({ kind: "string", value: src.slice(i + 1, close) });
      i = close + 1;
    } else if (c === ".") {
      const m = /^(?:\.[A-Za-z_][A-Za-z0-9_]*)+/.exec(rest);
      const fields = m ? m[0].slice(1).split(".") : [];
      const prev = tokens[tokens.length - 1];
      if (prev?.kind === "rparen" && src[i - 1] === ")" && m) tokens.push({ kind: "chain", value: fields });
      else tokens.push({ kind: "field", value: fields });
      i += m ? m[0].length : 1;
    } else if (c === "$") {
      const m = /^\$([A-Za-z_][A-Za-z0-9_]*)?((?:\.[A-Za-z_][A-Za-z0-9_]*)*)/.exec(rest)!;
      tokens.push({ kind: "var", name: m[1] ?? "", fields: m[2] ? m[2].slice(1).split(".") : [] });
      i += m[0].length;
    } else if (NUMBER.test(rest) && (c !== "-" || /[0-9]/.test(src[i + 1] ?? ""))) {
      const m = NUMBER.exec(rest)!;
      const isInt = /^-?(0x[0-9a-fA-F]+|\d+)$/.test(m[0]);
      tokens.push({ kind: "number", value: isInt ? BigInt(m[0]) : Number(m[0]) });
      i += m[0].length;
    } else if (IDENT.test(rest)) {
      const word = IDENT.exec(rest)![0];
      if (word === "true" || word === "false") tokens.push({ kind: "bool", value: word === "true" });
      else if (word === "nil") tokens.push({ kind: "nil" });
      else tokens.push({ kind: "ident", value: word });
      i += word.length;
    } else fail(`unexpected character ${JSON.stringify(c)}`);
  }
}
