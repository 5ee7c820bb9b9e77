/**
 * Parser for the chart's Go-template subset. Supported actions:
 *
 *   {{ pipeline }}                      output
 *   {{ if p }} / {{ else if p }} / {{ else }} / {{ end }}
 *   {{ with p }} ... [{{ else }}] {{ end }}
 *   {{ range p }}, {{ range $v := p }}, {{ range $i, $v := p }} ... [{{ else }}] {{ end }}
 *   {{ define "name" }} ... {{ end }}    (only at the top level)
 *   {{ $x := p }}, {{ $x = p }}
 *
 * A pipeline is commands joined by `|`; a command is a function name with
 * arguments, or a single operand (field `.A.B`, variable `$x.A`, literal,
 * `(pipeline)` optionally followed by `.Field`). Method calls with arguments
 * are allowed only on values that are functions (`.Capabilities.APIVersions.Has "x"`).
 * Anything else (`template`, `block`, `break`, `continue`, `else with`) is refused.
 */
import { TemplateError } from "./errors";
import { lex, type Token } from "./lexer";

export type Operand =
  | { kind: "field"; path: string[] }
  | { kind: "var"; name: string; path: string[] }
  | { kind: "literal"; value: unknown }
  | { kind: "ident"; name: string }
  | { kind: "sub"; pipeline: Pipeline; path: string[] };

export interface Command {
  args: Operand[];
}
export interface Pipeline {
  decl?: { names: string[]; op: "declare" | "assign" };
  commands: Command[];
  line: number;
}

export type Node =
  | { kind: "text"; text: string }
  | { kind: "output"; pipeline: Pipeline }
  | { kind: "if"; branches: { cond: Pipeline; body: Node[] }[]; otherwise?: Node[] }
  | { kind: "with"; pipeline: Pipeline; body: Node[]; otherwise?: Node[] }
  | { kind: "range"; pipeline: Pipeline; body: Node[]; otherwise?: Node[] };

export interface ParsedTemplate {
  body: Node[];
  defines: Map<string, Node[]>;
}

type Frame = { kind: "root"; nodes: Node[] } | { kind: "define"; name: string; nodes: Node[] } | { kind: "block"; node: Node; nodes: Node[] };

/** Parses one template file; `defines` holds its `{{ define }}` blocks. */
export function parseTemplate(source: string, name: string, isFunction: (n: string) => boolean): ParsedTemplate {
  const defines = new Map<string, Node[]>();
  const root: Frame = { kind: "root", nodes: [] };
  const stack: Frame[] = [root];
  const top = () => stack[stack.length - 1]!;
  for (const piece of lex(source, name)) {
    if (piece.kind === "text") {
      top().nodes.push({ kind: "text", text: piece.text });
      continue;
    }
    const where = `${name}:${piece.line}`;
    const fail = (msg: string): never => {
      throw new TemplateError(`${where}: ${msg}`);
    };
    const toks = piece.tokens;
    const head = toks[0];
    const keyword = head?.kind === "ident" ? head.value : undefined;
    const pipe = (from: number) => parsePipeline(toks.slice(from), where, piece.line, isFunction);
    if (keyword === "if" || keyword === "with" || keyword === "range") {
      const pipeline = pipe(1);
      if (keyword !== "range" && pipeline.decl) fail(`variable declarations in ${keyword} are not supported`);
      if (pipeline.decl && pipeline.decl.op !== "declare") fail("range needs :=");
      const nodes: Node[] = [];
      const node: Node =
        keyword === "if"
          ? { kind: "if", branches: [{ cond: pipeline, body: nodes }] }
          : { kind: keyword, pipeline, body: nodes };
      top().nodes.push(node);
      stack.push({ kind: "block", node, nodes });
    } else if (keyword === "else") {
      const frame = top();
      if (frame.kind !== "block") fail("else outside if/with/range");
      const block = frame as Extract<Frame, { kind: "block" }>;
      const node = block.node;
      const nodes: Node[] = [];
      if (toks[1]?.kind === "ident" && toks[1].value === "if") {
        if (node.kind !== "if" || node.otherwise) fail("else if only inside if, before else");
        (node as Extract<Node, { kind: "if" }>).branches.push({ cond: pipe(2), body: nodes });
      } else {
        if (toks.length !== 1) fail("only `else` and `else if` are supported");
        if (node.kind === "text" || node.kind === "output" || ("otherwise" in node && node.otherwise)) fail("second else");
        (node as { otherwise?: Node[] }).otherwise = nodes;
      }
      block.nodes = nodes;
    } else if (keyword === "end") {
      if (toks.length !== 1) fail("end takes no arguments");
      const frame = stack.pop()!;
      if (frame.kind === "root") fail("end without a block");
      if (frame.kind === "define") defines.set(frame.name, frame.nodes);
    } else if (keyword === "define") {
      if (stack.length !== 1) fail("define only at the top level");
      const n = toks[1];
      if (n?.kind !== "string" || toks.length !== 2) fail('define needs one quoted name: {{ define "name" }}');
      stack.push({ kind: "define", name: (n as { value: string }).value, nodes: [] });
    } else if (keyword && ["template", "block", "break", "continue"].includes(keyword)) {
      fail(`{{ ${keyword} }} is outside the supported subset (use include)`);
    } else {
      top().nodes.push({ kind: "output", pipeline: pipe(0) });
    }
  }
  if (stack.length !== 1) throw new TemplateError(`${name}: unclosed block (missing {{ end }})`);
  return { body: root.nodes, defines };
}

function parsePipeline(toks: Token[], where: string, line: number, isFunction: (n: string) => boolean): Pipeline {
  const fail = (msg: string): never => {
    throw new TemplateError(`${where}: ${msg}`);
  };
  let pos = 0;
  let decl: Pipeline["decl"];
  // `$a :=`, `$a =`, `$i, $v :=`
  const declEnd = toks.findIndex((t) => t.kind === "declare" || t.kind === "assign");
  if (declEnd > 0) {
    const names: string[] = [];
    for (let i = 0; i < declEnd; i++) {
      const t = toks[i]!;
      if (i % 2 === 0) {
        if (t.kind !== "var" || t.fields.length || !t.name) fail("only $name on the left of := or =");
        names.push((t as { name: string }).name);
      } else if (t.kind !== "comma") fail("expected , between variables");
    }
    if (names.length > 2) fail("at most two variables");
    decl = { names, op: toks[declEnd]!.kind === "declare" ? "declare" : "assign" };
    pos = declEnd + 1;
  }

  function operand(): Operand {
    const t = toks[pos++];
    if (!t) return fail("unexpected end of action");
    switch (t.kind) {
      case "field":
        return { kind: "field", path: t.value };
      case "var":
        return { kind: "var", name: t.name, path: t.fields };
      case "string":
      case "number":
      case "bool":
        return { kind: "literal", value: t.value };
      case "nil":
        return { kind: "literal", value: null };
      case "ident":
        if (!isFunction(t.value)) fail(`function ${JSON.stringify(t.value)} is outside the supported subset`);
        return { kind: "ident", name: t.value };
      case "lparen": {
        const inner = pipeline(true);
        if (toks[pos]?.kind !== "rparen") fail("missing )");
        pos++;
        const chain = toks[pos];
        if (chain?.kind === "chain") {
          pos++;
          return { kind: "sub", pipeline: inner, path: chain.value };
        }
        return { kind: "sub", pipeline: inner, path: [] };
      }
      default:
        return fail(`unexpected ${t.kind}`);
    }
  }

  function pipeline(nested: boolean): Pipeline {
    const commands: Command[] = [];
    let args: Operand[] = [];
    while (pos < toks.length) {
      const t = toks[pos]!;
      if (t.kind === "rparen") {
        if (!nested) fail("unexpected )");
        break;
      }
      if (t.kind === "pipe") {
        if (!args.length) fail("empty command before |");
        commands.push({ args });
        args = [];
        pos++;
        continue;
      }
      if (t.kind === "declare" || t.kind === "assign" || t.kind === "comma") fail(`unexpected ${t.kind}`);
      args.push(operand());
    }
    if (!args.length) fail("empty pipeline");
    commands.push({ args });
    return { commands, line };
  }

  const p = pipeline(false);
  return { ...p, decl };
}
