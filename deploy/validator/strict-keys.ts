/**
 * Strict field check: walks a manifest against the TypeScript interface of its
 * kind (kinds.ts, from kubernetes-models' .d.ts files, which mirror the
 * Kubernetes OpenAPI schema) and reports every key the schema does not define.
 * The JSON-schema validators allow unknown keys, so a misspelled `livenessProbe`
 * or `containerPort` would otherwise pass CI and be silently dropped by the API
 * server. Maps (labels, annotations, resources) are index signatures and accept
 * any key.
 *
 * @example
 * const check = createStrictKeyChecker();
 * check({ apiVersion: "v1", kind: "Service", spec: { typo: 1 } }); // => ["spec.typo: unknown field"]
 */
import { fileURLToPath } from "node:url";
import ts from "typescript";
import { kindKey } from "./kinds";

export type StrictKeyChecker = (object: Record<string, unknown>) => string[];

export function createStrictKeyChecker(): StrictKeyChecker {
  const file = fileURLToPath(new URL("./kinds.ts", import.meta.url));
  const program = ts.createProgram([file], {
    target: ts.ScriptTarget.ESNext,
    module: ts.ModuleKind.Preserve,
    moduleResolution: ts.ModuleResolutionKind.Bundler,
    types: [],
    noEmit: true,
    skipLibCheck: true,
  });
  const checker = program.getTypeChecker();
  const source = program.getSourceFile(file);
  if (!source) throw new Error(`strict-keys: cannot load ${file}`);
  const decl = source.statements.find((s): s is ts.InterfaceDeclaration => ts.isInterfaceDeclaration(s) && s.name.text === "KnownKinds");
  if (!decl) throw new Error("strict-keys: KnownKinds not found");
  const kinds = checker.getTypeAtLocation(decl);

  const typeOf = (sym: ts.Symbol) => checker.getNonNullableType(checker.getTypeOfSymbol(sym));

  function walk(type: ts.Type, value: unknown, path: string, errors: string[]) {
    if (value === null || value === undefined) return;
    if (type.flags & (ts.TypeFlags.Any | ts.TypeFlags.Unknown)) return;
    if (Array.isArray(value)) {
      const arr = pickArray(type);
      if (!arr) return; // type mismatch: left to the schema validator
      const elem = checker.getTypeArguments(arr as ts.TypeReference)[0];
      if (elem) value.forEach((v, i) => walk(checker.getNonNullableType(elem), v, `${path}[${i}]`, errors));
      return;
    }
    if (typeof value !== "object") return;
    const candidates = (type.isUnion() ? type.types : [type]).filter((t) => t.flags & ts.TypeFlags.Object && !checker.isArrayType(t));
    if (!candidates.length) return;
    // A union of object shapes: use the first that knows every key.
    const keys = Object.keys(value as object);
    const fits = (t: ts.Type) => keys.every((k) => checker.getPropertyOfType(t, k) || checker.getIndexInfoOfType(t, ts.IndexKind.String));
    const t = candidates.find(fits) ?? candidates[0]!;
    for (const k of keys) {
      const at = path ? `${path}.${k}` : k;
      const prop = checker.getPropertyOfType(t, k);
      const child = prop ? typeOf(prop) : checker.getIndexInfoOfType(t, ts.IndexKind.String)?.type;
      if (!child) {
        if (checker.getPropertiesOfType(t).length === 0) continue; // open object ({} / JSON)
        errors.push(`${at}: unknown field`);
        continue;
      }
      walk(checker.getNonNullableType(child), (value as Record<string, unknown>)[k], at, errors);
    }
  }

  function pickArray(type: ts.Type): ts.Type | undefined {
    if (checker.isArrayType(type)) return type;
    if (type.isUnion()) return type.types.find((t) => checker.isArrayType(t));
    return undefined;
  }

  return (object) => {
    const prop = checker.getPropertyOfType(kinds, kindKey(object));
    if (!prop) return [`${kindKey(object)}: no schema for this kind`];
    const errors: string[] = [];
    walk(typeOf(prop), object, "", errors);
    return errors;
  };
}
