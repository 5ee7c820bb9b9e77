import { expect, test } from "bun:test";
import { parseConfigKeys } from "./config-keys";
import { hashApiKey } from "./key-hash";

const hash = hashApiKey("sk-x", "p");

test("parses the YAML shape and the JSON env shape", () => {
  expect(parseConfigKeys([{ id: "a", hash, requests_per_minute: 60, tokens_per_minute: 0 }])).toEqual([
    { id: "a", hash, requestsPerMinute: 60, tokensPerMinute: undefined, disabled: false },
  ]);
  expect(parseConfigKeys(JSON.stringify([{ id: "b", hash, disabled: true }]))[0]!.disabled).toBe(true);
  expect(parseConfigKeys("")).toEqual([]);
});

test("refuses malformed entries with the path", () => {
  expect(() => parseConfigKeys([{ id: "a", hash: "sk-plaintext" }])).toThrow(/auth.keys\[0\].hash: .*sha256/);
  expect(() => parseConfigKeys([{ id: "a", hash, rpm: 5 }])).toThrow(/auth.keys\[0\].rpm is not a known key/);
  expect(() => parseConfigKeys([{ id: "a", hash }, { id: "a", hash }])).toThrow(/used twice/);
  expect(() => parseConfigKeys([{ id: "a", hash, requests_per_minute: -1 }])).toThrow(/whole number/);
  expect(() => parseConfigKeys({ id: "a" })).toThrow(/must be a list/);
});
