import { describe, expect, test } from "bun:test";
import { renderTemplate } from "./template";

const r = (src: string, data: unknown = {}) => renderTemplate(src, data);

describe("go-template subset", () => {
  test("fields, pipelines, quote and default", () => {
    const data = { Values: { a: { b: "x" }, n: 0, list: [1, 2] } };
    expect(r("{{ .Values.a.b }}", data)).toBe("x");
    expect(r("{{ .Values.a.b | quote }}", data)).toBe('"x"');
    expect(r('{{ .Values.missing | default "d" }}', data)).toBe("d");
    expect(r('{{ .Values.n | default 5 }}', data)).toBe("5");
    expect(r("{{ .Values.missing }}", data)).toBe("");
    expect(r('{{ printf "%s-%d" "a" 3 }}', data)).toBe("a-3");
    expect(r('{{ "abcdef" | trunc 3 }}', data)).toBe("abc");
  });

  test("trim markers eat whitespace on their side", () => {
    expect(r("a  \n  {{- 1 -}}  \n  b")).toBe("a1b");
    expect(r("a {{ 1 }} b")).toBe("a 1 b");
    expect(r("a\n{{- /* note */}}\nb")).toBe("a\nb");
  });

  test("if / else if / else with Go truthiness", () => {
    const t = '{{ if .a }}A{{ else if .b }}B{{ else }}C{{ end }}';
    expect(r(t, { a: [1] })).toBe("A");
    expect(r(t, { a: [], b: "x" })).toBe("B");
    expect(r(t, { a: {}, b: "" })).toBe("C");
    expect(r("{{ if and .a (not .b) }}yes{{ end }}", { a: 1, b: 0 })).toBe("yes");
    expect(r('{{ if or .missing "x" }}yes{{ end }}', {})).toBe("yes");
    expect(r('{{ if eq .k "v" }}y{{ else }}n{{ end }}', { k: "v" })).toBe("y");
  });

  test("and/or short-circuit like Go", () => {
    expect(r("{{ if and .a .a.b }}y{{ else }}n{{ end }}", { a: null })).toBe("n");
  });

  test("with and range rebind dot; maps range in key order; $ stays the root", () => {
    expect(r("{{ with .a }}{{ .b }}{{ end }}", { a: { b: 7 } })).toBe("7");
    expect(r("{{ with .a }}x{{ else }}none{{ end }}", { a: null })).toBe("none");
    expect(r("{{ range .l }}[{{ . }}]{{ end }}", { l: [1, 2] })).toBe("[1][2]");
    expect(r("{{ range $k, $v := .m }}{{ $k }}={{ $v }};{{ end }}", { m: { z: 1, a: 2 } })).toBe("a=2;z=1;");
    expect(r("{{ range .l }}{{ $.name }}{{ end }}", { l: [1, 2], name: "n" })).toBe("nn");
    expect(r("{{ range .l }}x{{ else }}empty{{ end }}", { l: [] })).toBe("empty");
  });

  test("variables are block scoped and assignable", () => {
    expect(r('{{ $x := "a" }}{{ if true }}{{ $x = "b" }}{{ end }}{{ $x }}')).toBe("b");
    expect(() => r("{{ if true }}{{ $y := 1 }}{{ end }}{{ $y }}")).toThrow(/undefined variable \$y/);
  });

  test("define / include / toYaml / nindent", () => {
    const t = '{{- define "labels" }}app: {{ .name }}{{ end -}}\nmetadata:\n  labels:\n    {{- include "labels" . | nindent 4 }}\n  ann:\n    {{- toYaml .ann | nindent 4 }}';
    expect(r(t, { name: "gw", ann: { b: "2", a: 1 } })).toBe("metadata:\n  labels:\n    app: gw\n  ann:\n    a: 1\n    b: \"2\"");
  });

  test("method calls on function values (Capabilities.APIVersions.Has)", () => {
    const data = { Capabilities: { APIVersions: { Has: (v: unknown) => v === "monitoring.coreos.com/v1" } } };
    expect(r('{{ if .Capabilities.APIVersions.Has "monitoring.coreos.com/v1" }}yes{{ end }}', data)).toBe("yes");
    expect(r('{{ if .Capabilities.APIVersions.Has "x/v1" }}yes{{ end }}', data)).toBe("");
  });

  test("required fails the render with its message", () => {
    expect(() => r('{{ required "redis.url is required" .url }}', {})).toThrow(/redis.url is required/);
  });

  test("refuses what the subset does not cover", () => {
    expect(() => r("{{ lookup \"v1\" \"Secret\" \"ns\" \"n\" }}")).toThrow(/outside the supported subset/);
    expect(() => r('{{ template "x" . }}')).toThrow(/outside the supported subset/);
    expect(() => r("{{ if .a }}open")).toThrow(/unclosed block/);
    expect(() => r("{{ end }}")).toThrow(/end without a block/);
    expect(() => r("{{ .a.b }}", { a: null })).toThrow(/nil pointer/);
    expect(() => r("{{ .a ")).toThrow(/unclosed action/);
    expect(() => r("{{ .a | }}")).toThrow(/empty pipeline/);
  });
});

describe("Helm's number semantics (values are float64)", () => {
  test("large float64 values print in exponent form, as Helm does; int prints plainly", () => {
    const data = { Values: { big: 4194304, small: 8080, ratio: 0.05, tiny: 0.00001 } };
    expect(r("{{ .Values.big }}", data)).toBe("4.194304e+06");
    expect(r("{{ .Values.big | quote }}", data)).toBe('"4.194304e+06"');
    expect(r("{{ int .Values.big | quote }}", data)).toBe('"4194304"');
    expect(r("{{ .Values.small }} {{ .Values.ratio }} {{ .Values.tiny }}", data)).toBe("8080 0.05 1e-05");
    expect(r("{{ toYaml .Values.big }}", data)).toBe("4194304");
    expect(r("{{ div 905 10 }}", data)).toBe("90");
  });
  test("printf %d wants an int and eq refuses int vs float, like Go", () => {
    expect(r('{{ printf "%d" (int .n) }}', { n: 3 })).toBe("3");
    expect(() => r('{{ printf "%d" .n }}', { n: 3 })).toThrow(/use int/);
    expect(() => r("{{ eq .n 3 }}", { n: 3 })).toThrow(/incompatible types/);
    expect(r("{{ eq (int .n) 3 }}", { n: 3 })).toBe("true");
    expect(r("{{ range $i, $v := .l }}{{ printf \"%d\" $i }}{{ end }}", { l: ["a", "b"] })).toBe("01");
  });
});
