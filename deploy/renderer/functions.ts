/**
 * The Helm/Sprig functions the chart may use, with Helm's semantics. A
 * function not listed here makes the parser refuse the template.
 */
import { createHash } from "node:crypto";
import { stringify } from "yaml";
import { TemplateError } from "./errors";
import { printValue, truthy, type RenderContext, type TemplateFunction } from "./evaluate";

const str = (v: unknown) => printValue(v);

function num(v: unknown, fn: string): number {
  if (typeof v === "number") return v;
  if (typeof v === "bigint") return Number(v);
  if (typeof v === "string" && v.trim() !== "" && !Number.isNaN(Number(v))) return Number(v);
  throw new TemplateError(`${fn}: expected a number, got ${JSON.stringify(v)}`);
}

function goEqual(a: unknown, b: unknown): boolean {
  if (a === undefined) a = null;
  if (b === undefined) b = null;
  if (typeof a === "bigint" && typeof b === "bigint") return a === b;
  if ((typeof a === "bigint" && typeof b === "number") || (typeof a === "number" && typeof b === "bigint"))
    throw new TemplateError("eq/ne: incompatible types for comparison (int and float64; convert with int)");
  if (typeof a === "object" || typeof b === "object") {
    if (a === null && b === null) return true;
    throw new TemplateError("eq/ne compare only strings, numbers, booleans and nil");
  }
  return a === b;
}

function isMap(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** Sprig's mergeOverwrite: maps merge recursively, anything else from `src` replaces. */
function mergeInto(dst: Record<string, unknown>, src: unknown): void {
  if (!isMap(src)) throw new TemplateError("mergeOverwrite: sources must be maps");
  for (const [k, v] of Object.entries(src)) {
    const cur = dst[k];
    if (isMap(cur) && isMap(v)) mergeInto(cur, v);
    else dst[k] = structuredClone(v);
  }
}

/** Helm's toYaml: keys sorted, trailing newline trimmed. */
export function toYaml(v: unknown): string {
  if (v === undefined || v === null) return "null";
  return stringify(v, { version: "1.1", sortMapEntries: true, indentSeq: false, lineWidth: 0 }).replace(/\n$/, "");
}

function indent(n: unknown, s: unknown): string {
  const pad = " ".repeat(num(n, "indent"));
  return str(s)
    .split("\n")
    .map((l) => pad + l)
    .join("\n");
}

/** Builds the function table; `ctx` gives `include` access to the chart's named templates. */
export function createFunctions(ctx: RenderContext): Record<string, TemplateFunction> {
  const lazy = (f: unknown) => (f as () => unknown)();
  return {
    include: (name, data) => ctx.include(str(name), data),
    toYaml: (v) => toYaml(v),
    indent: (n, s) => indent(n, s),
    nindent: (n, s) => "\n" + indent(n, s),
    // Sprig skips nil arguments: `quote .missing` is empty, not `""`.
    quote: (...xs) => xs.filter((x) => x !== null && x !== undefined).map((x) => JSON.stringify(str(x))).join(" "),
    default: (d, v) => (truthy(v) ? v : d),
    required: (msg, v) => {
      if (v === null || v === undefined || v === "") throw new TemplateError(str(msg));
      return v;
    },
    trunc: (n, s) => {
      const k = num(n, "trunc");
      const t = str(s);
      return k >= 0 ? t.slice(0, k) : t.slice(k);
    },
    trimSuffix: (suffix, s) => {
      const t = str(s);
      const x = str(suffix);
      return x && t.endsWith(x) ? t.slice(0, -x.length) : t;
    },
    contains: (needle, s) => str(s).includes(str(needle)),
    replace: (from, to, s) => str(s).split(str(from)).join(str(to)),
    lower: (s) => str(s).toLowerCase(),
    printf: (fmt, ...args) => {
      let i = 0;
      return str(fmt).replace(/%([sdv%])/g, (_, verb: string) => {
        if (verb === "%") return "%";
        if (i >= args.length) throw new TemplateError(`printf: missing argument for %${verb}`);
        const a = args[i++];
        if (verb === "d") {
          // Go prints %!d(float64=...) for a float: values are float64 in Helm, so convert with int.
          if (typeof a !== "bigint") throw new TemplateError(`printf %d needs an int, got ${typeof a === "number" ? "a float64 (use int)" : typeof a}`);
          return String(a);
        }
        return str(a);
      });
    },
    toString: (v: unknown) => str(v),
    // Go's fmt.Sprint: a space between operands only when neither is a string.
    print: (...xs) => xs.map((x, i) => (i > 0 && typeof x !== "string" && typeof xs[i - 1] !== "string" ? " " : "") + str(x)).join(""),
    int: (v) => (typeof v === "bigint" ? v : BigInt(Math.trunc(num(v, "int")))),
    div: (a, b) => {
      const d = BigInt(Math.trunc(num(b, "div")));
      if (d === 0n) throw new TemplateError("div: division by zero");
      return BigInt(Math.trunc(num(a, "div"))) / d;
    },
    b64enc: (v) => Buffer.from(str(v)).toString("base64"),
    sha256sum: (v) => createHash("sha256").update(str(v)).digest("hex"),
    list: (...xs) => xs,
    dict: (...kv) => {
      if (kv.length % 2) throw new TemplateError("dict needs key/value pairs");
      const out: Record<string, unknown> = {};
      for (let i = 0; i < kv.length; i += 2) out[str(kv[i])] = kv[i + 1];
      return out;
    },
    append: (l, v) => {
      if (!Array.isArray(l)) throw new TemplateError("append: first argument must be a list");
      return [...l, v];
    },
    deepCopy: (v) => structuredClone(v ?? null),
    mergeOverwrite: (dst, ...srcs) => {
      if (!isMap(dst)) throw new TemplateError("mergeOverwrite: destination must be a map");
      for (const s of srcs) mergeInto(dst, s);
      return dst;
    },
    hasKey: (m, k) => typeof m === "object" && m !== null && Object.hasOwn(m, str(k)),
    empty: (v) => !truthy(v),
    eq: (a, ...bs) => bs.some((b) => goEqual(a, b)),
    ne: (a, b) => !goEqual(a, b),
    lt: (a, b) => num(a, "lt") < num(b, "lt"),
    le: (a, b) => num(a, "le") <= num(b, "le"),
    gt: (a, b) => num(a, "gt") > num(b, "gt"),
    ge: (a, b) => num(a, "ge") >= num(b, "ge"),
    not: (v) => !truthy(v),
    and: (...fs) => {
      let v: unknown = true;
      for (const f of fs) if (!truthy((v = lazy(f)))) return v;
      return v;
    },
    or: (...fs) => {
      let v: unknown = false;
      for (const f of fs) if (truthy((v = lazy(f)))) return v;
      return v;
    },
  };
}
