/**
 * Executes parsed templates with Go/Helm semantics for the supported subset:
 * truthiness (false, 0, nil, "" and empty collections are false), `with` and
 * `range` rebinding dot, map ranges in sorted key order, block-scoped
 * variables, `$` bound to the data the template was invoked with, missing map
 * keys reading as nil (printed as ""), and a field read on nil being an error.
 */
import { TemplateError } from "./errors";
import type { Command, Node, Operand, Pipeline } from "./parse";

/** A template function: receives evaluated arguments (a piped value comes last). */
export type TemplateFunction = (...args: unknown[]) => unknown;

/** Functions that see the renderer (include, tpl-like). */
export interface RenderContext {
  include(name: string, data: unknown): string;
}

/** Short-circuit functions are evaluated lazily. */
const LAZY = new Set(["and", "or"]);

class Scope {
  private vars = new Map<string, unknown>();
  constructor(private readonly parent?: Scope) {}
  declare(name: string, v: unknown) {
    this.vars.set(name, v);
  }
  assign(name: string, v: unknown, where: string) {
    for (let s: Scope | undefined = this; s; s = s.parent) {
      if (s.vars.has(name)) return void s.vars.set(name, v);
    }
    throw new TemplateError(`${where}: assignment to undeclared variable $${name}`);
  }
  get(name: string, where: string): unknown {
    for (let s: Scope | undefined = this; s; s = s.parent) if (s.vars.has(name)) return s.vars.get(name);
    throw new TemplateError(`${where}: undefined variable $${name}`);
  }
  child() {
    return new Scope(this);
  }
}

/** Go's notion of "true" for if/with/and/or/not. */
export function truthy(v: unknown): boolean {
  if (v === null || v === undefined || v === false || v === 0 || v === "") return false;
  if (Array.isArray(v)) return v.length > 0;
  if (typeof v === "object") return Object.keys(v as object).length > 0;
  return true;
}

/**
 * Go's %v of a float64. Helm reads every number in values as float64, so
 * `{{ .Values.n }}` of 4194304 prints `4.194304e+06`: exponent form from 1e6
 * up (and below 1e-4). Rendering it the same way makes that classic chart bug
 * visible in CI; `int` (a bigint here, an int64 in Go) prints plainly.
 */
export function goFloat(x: number): string {
  if (!Number.isFinite(x)) return x > 0 ? "+Inf" : x < 0 ? "-Inf" : "NaN";
  if (x === 0) return "0";
  const [mant, e] = x.toExponential().split("e") as [string, string];
  const exp = Number(e);
  if (exp < -4 || exp >= 6) return `${mant}e${exp < 0 ? "-" : "+"}${String(Math.abs(exp)).padStart(2, "0")}`;
  return String(x);
}

/** How Go prints a value in `{{ x }}`; nil prints as "" (Helm replaces `<no value>`). */
export function printValue(v: unknown): string {
  if (v === null || v === undefined) return "";
  if (typeof v === "string") return v;
  if (typeof v === "bigint" || typeof v === "boolean") return String(v);
  if (typeof v === "number") return goFloat(v);
  if (Array.isArray(v)) return `[${v.map(printValue).join(" ")}]`;
  if (typeof v === "object")
    return `map[${Object.keys(v as object)
      .sort()
      .map((k) => `${k}:${printValue((v as Record<string, unknown>)[k])}`)
      .join(" ")}]`;
  throw new TemplateError(`cannot print a ${typeof v}`);
}

export class Executor {
  constructor(
    private readonly name: string,
    private readonly functions: Record<string, TemplateFunction>,
  ) {}

  run(nodes: Node[], dot: unknown): string {
    const scope = new Scope();
    scope.declare("", dot);
    return this.nodes(nodes, dot, scope);
  }

  private nodes(nodes: Node[], dot: unknown, scope: Scope): string {
    let out = "";
    for (const n of nodes) out += this.node(n, dot, scope);
    return out;
  }

  private node(n: Node, dot: unknown, scope: Scope): string {
    switch (n.kind) {
      case "text":
        return n.text;
      case "output": {
        const v = this.pipeline(n.pipeline, dot, scope);
        return n.pipeline.decl ? "" : printValue(v);
      }
      case "if": {
        for (const b of n.branches) {
          if (truthy(this.pipeline(b.cond, dot, scope))) return this.nodes(b.body, dot, scope.child());
        }
        return n.otherwise ? this.nodes(n.otherwise, dot, scope.child()) : "";
      }
      case "with": {
        const v = this.pipeline(n.pipeline, dot, scope);
        if (truthy(v)) return this.nodes(n.body, v, scope.child());
        return n.otherwise ? this.nodes(n.otherwise, dot, scope.child()) : "";
      }
      case "range": {
        const names = n.pipeline.decl?.names ?? [];
        const v = this.pipeline({ ...n.pipeline, decl: undefined }, dot, scope);
        let entries: [unknown, unknown][];
        if (v === null || v === undefined) entries = [];
        else if (Array.isArray(v)) entries = v.map((x, i) => [BigInt(i), x]);
        else if (typeof v === "object")
          entries = Object.keys(v as object)
            .sort()
            .map((k) => [k, (v as Record<string, unknown>)[k]]);
        else throw new TemplateError(`${this.name}:${n.pipeline.line}: range over a ${typeof v}`);
        if (!entries.length) return n.otherwise ? this.nodes(n.otherwise, dot, scope.child()) : "";
        let out = "";
        for (const [k, x] of entries) {
          const s = scope.child();
          if (names.length === 1) s.declare(names[0]!, x);
          if (names.length === 2) (s.declare(names[0]!, k), s.declare(names[1]!, x));
          out += this.nodes(n.body, x, s);
        }
        return out;
      }
    }
  }

  private pipeline(p: Pipeline, dot: unknown, scope: Scope): unknown {
    const where = `${this.name}:${p.line}`;
    let value: unknown;
    let hasPiped = false;
    for (const cmd of p.commands) {
      value = this.command(cmd, dot, scope, where, hasPiped ? [value] : []);
      hasPiped = true;
    }
    if (p.decl) {
      if (p.decl.names.length !== 1) throw new TemplateError(`${where}: two variables only in range`);
      if (p.decl.op === "declare") scope.declare(p.decl.names[0]!, value);
      else scope.assign(p.decl.names[0]!, value, where);
    }
    return value;
  }

  private command(cmd: Command, dot: unknown, scope: Scope, where: string, piped: unknown[]): unknown {
    const [first, ...rest] = cmd.args;
    if (first!.kind === "ident") {
      const fn = this.functions[first!.name]!;
      if (LAZY.has(first!.name)) {
        const thunks = [...rest.map((a) => () => this.operand(a, dot, scope, where)), ...piped.map((v) => () => v)];
        return fn(...thunks);
      }
      const args = [...rest.map((a) => this.operand(a, dot, scope, where)), ...piped];
      try {
        return fn(...args);
      } catch (e) {
        if (e instanceof TemplateError) throw new TemplateError(`${where}: ${e.message}`);
        throw e;
      }
    }
    const v = this.operand(first!, dot, scope, where);
    if (typeof v === "function") {
      const args = [...rest.map((a) => this.operand(a, dot, scope, where)), ...piped];
      return (v as TemplateFunction)(...args);
    }
    if (rest.length || piped.length) throw new TemplateError(`${where}: can't give arguments to a non-function`);
    return v;
  }

  private operand(o: Operand, dot: unknown, scope: Scope, where: string): unknown {
    switch (o.kind) {
      case "literal":
        return o.value;
      case "field":
        return walk(dot, o.path, where);
      case "var":
        return walk(scope.get(o.name, where), o.path, where);
      case "sub":
        return walk(this.pipeline(o.pipeline, dot, scope), o.path, where);
      case "ident":
        return this.functions[o.name]!();
    }
  }
}

function walk(v: unknown, path: string[], where: string): unknown {
  let cur = v;
  for (let i = 0; i < path.length; i++) {
    const key = path[i]!;
    if (cur === null || cur === undefined)
      throw new TemplateError(`${where}: nil pointer evaluating .${path.slice(0, i + 1).join(".")}`);
    if (typeof cur !== "object" || Array.isArray(cur))
      throw new TemplateError(`${where}: can't read field ${key} of a ${Array.isArray(cur) ? "list" : typeof cur}`);
    cur = Object.hasOwn(cur, key) ? (cur as Record<string, unknown>)[key] : undefined;
  }
  return cur;
}
