import { expect, test } from "bun:test";
import { parseAllDocuments } from "yaml";
import { validateManifests } from "../validator/validate";
import { MANIFEST_PATH, plainManifests } from "./plain-manifests";

test("deploy/manifests/dispatch.yaml is up to date (regenerate: bun deploy/scripts/plain-manifests.ts)", async () => {
  const committed = await Bun.file(MANIFEST_PATH).text();
  expect(committed).toBe(plainManifests());
});

test("the plain manifests validate", async () => {
  const docs = parseAllDocuments(await Bun.file(MANIFEST_PATH).text(), { version: "1.1" });
  const objects = (Array.isArray(docs) ? docs : []).map((d) => d.toJS()).filter(Boolean);
  expect(objects.length).toBeGreaterThan(8);
  expect(validateManifests(objects)).toEqual([]);
});
