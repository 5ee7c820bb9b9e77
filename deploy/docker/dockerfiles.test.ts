/**
 * No Docker engine here, so the container files are checked statically:
 * non-root USER, a HEALTHCHECK on the real endpoint, the port the chart
 * probes, pinned base images, and every path they COPY from the build context
 * exists in the repository (a renamed folder fails CI, not the release build).
 */
import { describe, expect, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { parse } from "yaml";

const root = join(import.meta.dir, "..", "..");
const values = parse(readFileSync(join(root, "deploy/helm/dispatch/values.yaml"), "utf8"));

const IMAGES = [
  { file: "gateway.Dockerfile", port: values.gateway.port as number, entry: "gateway/src/main.ts" },
  { file: "model-server.Dockerfile", port: values.modelServer.port as number, entry: "model-server/src/main.ts" },
];

/** Instructions with line continuations joined. */
function instructions(text: string): { op: string; args: string }[] {
  return text
    .replace(/\\\n/g, " ")
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith("#"))
    .map((l) => {
      const [op, ...rest] = l.split(/\s+/);
      return { op: op!.toUpperCase(), args: rest.join(" ") };
    });
}

describe("container files", () => {
  for (const img of IMAGES) {
    test(img.file, () => {
      const ins = instructions(readFileSync(join(import.meta.dir, img.file), "utf8"));
      const args = Object.fromEntries(ins.filter((i) => i.op === "ARG" && i.args.includes("=")).map((i) => i.args.split("=") as [string, string]));
      const stages = ins.filter((i) => i.op === "FROM");
      const final = ins.slice(ins.lastIndexOf(stages[stages.length - 1]!));
      // Base images pinned to a version (ARG defaults substituted), never :latest or untagged.
      for (const f of stages) {
        const image = f.args.split(/\s+/)[0]!.replace(/\$\{(\w+)\}/g, (_, n: string) => args[n] ?? `<${n}>`);
        expect(image).toMatch(/^[\w./-]+:[\w.-]*\d[\w.-]*$/);
        expect(image).not.toContain("<");
      }
      const user = final.filter((i) => i.op === "USER").pop()?.args ?? "root";
      expect(user).not.toMatch(/^(root|0)(:|$)/);
      const health = final.find((i) => i.op === "HEALTHCHECK")?.args ?? "";
      expect(health).toContain("/healthz");
      expect(final.find((i) => i.op === "EXPOSE")?.args).toBe(String(img.port));
      expect(final.find((i) => i.op === "ENTRYPOINT")?.args).toContain(img.entry);
      expect(existsSync(join(root, img.entry))).toBe(true);
      for (const c of ins.filter((i) => i.op === "COPY" && !i.args.startsWith("--from"))) {
        const parts = c.args.split(/\s+/);
        for (const src of parts.slice(0, -1)) expect(existsSync(join(root, src))).toBe(true);
      }
      // The Dockerfile-specific ignore file exists (the build context is the whole repository).
      expect(existsSync(join(import.meta.dir, `${img.file}.dockerignore`))).toBe(true);
    });
  }
});
