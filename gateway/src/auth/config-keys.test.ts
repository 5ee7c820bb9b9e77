import { expect, test } from "bun:test";
import { parse as parseYaml } from "yaml";
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

test("a key's models and priority; malformed ones refused with the path", () => {
  expect(parseConfigKeys([{ id: "a", hash, models: ["m1", "m2"], priority: -3 }])[0]).toMatchObject({ models: ["m1", "m2"], priority: -3 });
  expect(() => parseConfigKeys([{ id: "a", hash, models: "m1" }])).toThrow(/auth.keys\[0\].models must be a list/);
  expect(() => parseConfigKeys([{ id: "a", hash, priority: 1.5 }])).toThrow(/auth.keys\[0\].priority must be an integer/);
});

test("hash-key-cli prints an entry the config takes as it is (snake_case keys)", async () => {
  const p = Bun.spawn([process.execPath, new URL("./hash-key-cli.ts", import.meta.url).pathname, "--id", "team", "--rpm", "60", "--tpm", "1000", "--models", "m1,m2", "--priority", "4"], {
    env: { ...process.env, DISPATCH_AUTH_PEPPER: "p" },
    stdin: new TextEncoder().encode("sk-secret\n"),
    stdout: "pipe",
  });
  const out = await new Response(p.stdout).text();
  expect(await p.exited).toBe(0);
  const [entry] = parseConfigKeys(parseYaml(out));
  expect(entry).toMatchObject({ id: "team", requestsPerMinute: 60, tokensPerMinute: 1000, models: ["m1", "m2"], priority: 4 });
});
