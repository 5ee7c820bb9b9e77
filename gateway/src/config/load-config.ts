/**
 * Loads the configuration: defaults < YAML file < environment (`DISPATCH_*`)
 * < command line. Environment names are derived from the schema:
 * `DISPATCH_<SECTION>_<KEY>` (e.g. DISPATCH_SERVER_PORT, DISPATCH_ROUTING_POLICY),
 * plus `DISPATCH_CONFIG` (the file), `DISPATCH_BACKENDS` and the plain `PORT`.
 * Anything invalid stops the start with a ConfigError naming the key.
 *
 * @example
 * const cfg = loadConfig({ argv: ["--config", "gw.yaml", "--port", "9000"], env: process.env });
 */
import { readFileSync } from "node:fs";
import { parse as parseYaml } from "yaml";
import { checkBackend, ConfigError, finish, finishSources, type GatewayConfig, SECTIONS, setLeaf, validateConfig } from "./schema";

export const ENV_PREFIX = "DISPATCH_";

/** Every environment variable the gateway reads, with the config key it sets. */
export function envTable(): { name: string; key: string }[] {
  const rows = [
    { name: "DISPATCH_CONFIG", key: "(path of the YAML file)" },
    { name: "DISPATCH_BACKENDS", key: "backends (comma-separated kind=url, e.g. dispatch=http://127.0.0.1:9000,openai=http://h:8000/v1)" },
    { name: "PORT", key: "server.port (below DISPATCH_SERVER_PORT)" },
  ];
  for (const [section, keys] of Object.entries(SECTIONS)) {
    for (const key of Object.keys(keys)) rows.push({ name: `${ENV_PREFIX}${section}_${key}`.toUpperCase(), key: `${section}.${key}` });
  }
  return rows;
}

/** `kind=url[,kind=url...]`; a bare URL means a dispatch server. */
export function parseBackendList(text: string, source: string): GatewayConfig["backends"] {
  return text
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean)
    .map((item, i) => {
      const m = /^([a-z-]+)=(.+)$/.exec(item);
      const kind = m ? m[1] : "dispatch";
      const url = m ? m[2] : item;
      try {
        return checkBackend({ kind, url, id: `${kind}-${i}` }, i);
      } catch (err) {
        throw new ConfigError(`${source}: ${(err as Error).message}`);
      }
    });
}

export interface CliArgs {
  config?: string;
  port?: string;
  host?: string;
  backends: string[];
}

export function parseArgs(argv: readonly string[]): CliArgs {
  const out: CliArgs = { backends: [] };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    const [flag, inline] = a.includes("=") ? [a.slice(0, a.indexOf("=")), a.slice(a.indexOf("=") + 1)] : [a, undefined];
    const value = () => {
      const v = inline ?? argv[++i];
      if (v === undefined) throw new ConfigError(`command line: ${flag} needs a value`);
      return v;
    };
    if (flag === "--config") out.config = value();
    else if (flag === "--port") out.port = value();
    else if (flag === "--host") out.host = value();
    else if (flag === "--backend") out.backends.push(value());
    else throw new ConfigError(`command line: unknown argument ${a} (known: --config FILE, --port N, --host ADDR, --backend kind=url)`);
  }
  return out;
}

export interface LoadedConfig {
  config: GatewayConfig;
  /** DISPATCH_* variables that matched no key (another component's, or a typo): logged as a warning. */
  unknownEnv: string[];
}

export function loadConfig(o: { argv: readonly string[]; env: Record<string, string | undefined> }): LoadedConfig {
  const args = parseArgs(o.argv);
  const file = args.config ?? o.env.DISPATCH_CONFIG;
  let raw: unknown = undefined;
  if (file) {
    let text: string;
    try {
      text = readFileSync(file, "utf8");
    } catch (err) {
      throw new ConfigError(`cannot read config file ${file}: ${(err as Error).message}`);
    }
    try {
      raw = parseYaml(text);
    } catch (err) {
      throw new ConfigError(`config file ${file} is not valid YAML: ${(err as Error).message}`);
    }
  }
  let cfg: GatewayConfig;
  try {
    cfg = validateConfig(raw);
  } catch (err) {
    throw new ConfigError(file ? `${file}: ${(err as Error).message}` : (err as Error).message);
  }

  if (o.env.PORT !== undefined && o.env.PORT !== "") setLeaf(cfg, "server", "port", o.env.PORT, "PORT");
  // Plus the request path's benchmark and fallback switches, read where they act (docs/gateway-bench.md).
  const known = new Set(["DISPATCH_CONFIG", "DISPATCH_BACKENDS", "DISPATCH_TTFT_MARKS", "DISPATCH_PROTO_FAST", "DISPATCH_FIRST_SYNC"]);
  for (const [section, keys] of Object.entries(SECTIONS)) {
    for (const key of Object.keys(keys)) {
      const name = `${ENV_PREFIX}${section}_${key}`.toUpperCase();
      known.add(name);
      const v = o.env[name];
      if (v !== undefined && v !== "") setLeaf(cfg, section as keyof typeof SECTIONS, key, v, name);
    }
  }
  if (o.env.DISPATCH_BACKENDS) cfg.backends = parseBackendList(o.env.DISPATCH_BACKENDS, "DISPATCH_BACKENDS");
  if (args.host !== undefined) setLeaf(cfg, "server", "host", args.host, "--host");
  if (args.port !== undefined) setLeaf(cfg, "server", "port", args.port, "--port");
  if (args.backends.length > 0) cfg.backends = parseBackendList(args.backends.join(","), "--backend");
  const unknownEnv = Object.keys(o.env).filter((k) => k.startsWith(ENV_PREFIX) && !known.has(k));
  return { config: finishSources(finish(cfg)), unknownEnv };
}
