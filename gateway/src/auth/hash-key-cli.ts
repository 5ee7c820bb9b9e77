/**
 * Operator tool: makes or hashes an API key.
 *
 *   DISPATCH_AUTH_PEPPER=... bun gateway/src/auth/hash-key-cli.ts [--new] [--id team-a] [--rpm 600] [--tpm 200000]
 *     [--models m1,m2] [--priority 5] [--redis redis://...]
 *
 * Reads the key from stdin (so it stays out of shell history) unless --new
 * generates one (printed once, on stderr). Prints the config entry (YAML) to
 * paste under auth.keys; with --redis, stores it in Redis instead
 * (dispatch:apikey:<digest>), where gateways pick it up without a restart.
 */
import Redis from "ioredis";
import { generateApiKey, hashApiKey } from "./key-hash";

function flag(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : undefined;
}

const pepper = process.env.DISPATCH_AUTH_PEPPER;
if (pepper === undefined) {
  console.error("set DISPATCH_AUTH_PEPPER (the same value the gateways use)");
  process.exit(2);
}
let key: string;
if (process.argv.includes("--new")) {
  key = generateApiKey();
  console.error(`new API key (shown once): ${key}`);
} else {
  key = (await Bun.stdin.text()).trim();
  if (!key) {
    console.error("pipe the key on stdin, or pass --new");
    process.exit(2);
  }
}
const hash = hashApiKey(key, pepper);
const entry = {
  id: flag("id") ?? "key",
  hash,
  ...(flag("rpm") ? { requestsPerMinute: Number(flag("rpm")) } : {}),
  ...(flag("tpm") ? { tokensPerMinute: Number(flag("tpm")) } : {}),
  ...(flag("models") ? { models: flag("models")!.split(",").map((m) => m.trim()).filter(Boolean) } : {}),
  ...(flag("priority") ? { priority: Number(flag("priority")) } : {}),
};
const url = flag("redis");
if (url) {
  const redis = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1 });
  await redis.connect();
  await redis.set(`dispatch:apikey:${hash.slice("sha256:".length)}`, JSON.stringify(entry));
  redis.disconnect();
  console.log(`stored key ${entry.id} in Redis`);
} else {
  // the config's own keys (snake_case, as config-keys.ts reads them)
  console.log(
    `- id: ${entry.id}\n  hash: "${hash}"` +
      (entry.requestsPerMinute ? `\n  requests_per_minute: ${entry.requestsPerMinute}` : "") +
      (entry.tokensPerMinute ? `\n  tokens_per_minute: ${entry.tokensPerMinute}` : "") +
      (entry.models ? `\n  models: ${JSON.stringify(entry.models)}` : "") +
      (entry.priority !== undefined ? `\n  priority: ${entry.priority}` : ""),
  );
}
