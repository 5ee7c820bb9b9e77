import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { envTable } from "./load-config";

test("docs/configuration.md lists every environment variable the gateway reads", () => {
  const doc = readFileSync(new URL("../../../docs/configuration.md", import.meta.url), "utf8");
  const documented = new Set([...doc.matchAll(/^\| `([A-Z_]+)` \|/gm)].map((m) => m[1]));
  const read = envTable().map((r) => r.name);
  expect([...documented].sort()).toEqual([...read].sort());
});
