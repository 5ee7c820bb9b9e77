/**
 * The gateway's configuration: its shape, defaults and validation. Every key
 * is known here; an unknown key or a bad value is refused with a message that
 * names the key (`config.server.port must be an integer in 0..65535, got "x"`).
 */
import { parseConfigKeys } from "../auth/config-keys";
import type { ApiKeyConfig } from "../auth/key-store";

export type LogLevel = "debug" | "info" | "warn" | "error";

export interface BackendConfig {
  /** Defaults to "<kind>-<index>". */
  id: string;
  kind: "dispatch" | "openai";
  url: string;
  /** dispatch only: connect (HTTP/1.1), grpc (HTTP/2) or grpc-web. */
  protocol: "connect" | "grpc" | "grpc-web";
  /** openai only: a fixed model list (default: ask GET /v1/models). */
  models: string[];
  /** openai only: sent upstream as a bearer token. */
  api_key: string;
  /** openai only: Prometheus endpoint scraped for load-aware routing; empty: `<url without /v1>/metrics`. */
  metrics_url: string;
}

export interface GatewayConfig {
  server: {
    host: string;
    port: number;
    /** Largest request body accepted (413 beyond). */
    max_body_bytes: number;
    /** Requests in flight across the gateway before 429s; 0: unlimited. */
    max_in_flight: number;
    /** Upper bound on one generation request; 0: none. */
    request_timeout_ms: number;
    /** Bun's idle timeout for connections (generation requests are exempt, so quiet streams live). */
    idle_timeout_s: number;
    /**
     * On SIGTERM / SIGINT: how long requests in flight (streams included) may take to finish after the gateway stops
     * accepting connections; then the rest are closed. 0: close at once.
     */
    shutdown_grace_s: number;
    /** Prompts longer than this many tokens are refused with 400; 0: only the model's context limit. */
    max_prompt_tokens: number;
    /**
     * auto: a dispatch model whose chat template announces `<think>` blocks (Qwen3, QwQ, DeepSeek-R1) gets its
     * thinking in `reasoning_content`, the answer in `content`; off: the text as generated.
     */
    reasoning_parser: "auto" | "off";
  };
  auth: {
    /** Accepted bearer tokens; empty: no authentication. */
    api_keys: string[];
    /** Hashed keys with per-key limits (gateway/src/auth; docs/security.md). */
    keys: ApiKeyConfig[];
    /** HMAC key of the key hashes; set through DISPATCH_AUTH_PEPPER from a Secret. */
    pepper: string;
  };
  redis: {
    /** redis://host:6379/0 for shared rate-limit buckets and API keys; empty: none. */
    url: string;
  };
  responses: {
    /**
     * Where `/v1/responses` keeps responses for GET and `previous_response_id`: auto (Redis when redis.url is set,
     * else memory), memory (this replica only), redis, or off (every request is stateless; `store: true` is ignored).
     */
    store: "auto" | "memory" | "redis" | "off";
    /** memory: most responses kept (the oldest go first). */
    max_entries: number;
    /** memory: most stored responses by the size of their JSON text, in characters (about bytes; the oldest go first). */
    max_bytes: number;
    /** How long a stored response lives. */
    ttl_s: number;
    /** Longest chain of `previous_response_id` links one request may continue. */
    max_chain: number;
  };
  batches: {
    /** Where uploaded files and batch outputs are kept (a folder per gateway process); empty: the OS temp folder. */
    dir: string;
    /** Largest file upload (`POST /v1/files`). */
    max_file_bytes: number;
    /** Most requests in one batch's input file. */
    max_requests: number;
    /** Requests of one batch in flight at once. */
    concurrency: number;
    /** Sets `priority` on a batch's chat / completions / responses requests that have none (0: leave it unset). */
    priority: number;
  };
  discovery: {
    /** static: `backends` only; kubernetes: also the EndpointSlices matching label_selector. */
    mode: "static" | "kubernetes";
    /** Empty: the pod's own namespace. */
    namespace: string;
    label_selector: string;
    port_name: string;
    /** Empty: in-cluster (service-account token). Else an API URL that needs no token, e.g. `kubectl proxy`'s http://127.0.0.1:8001. */
    api_server: string;
  };
  routing: {
    /** dispatch (default), least-load, power-of-two, consistent-hash, sglang-cache-aware, llm-d-weighted, round-robin, least-outstanding. */
    policy: string;
    /**
     * dispatch policy: how much more estimated latency (ms) a request with an affinity key
     * (`prompt_cache_key`, a session) accepts to stay on its session's server (default 20).
     */
    affinity_slack_ms: number;
  };
  upstream: {
    /**
     * Bound on opening a new connection to a model server (Generate over the socket client); one not open
     * in time fails like a refused one and the request is retried on another server. 0: none (the kernel's
     * ~2 min).
     */
    connect_timeout_ms: number;
  };
  retry: {
    /** Attempts per request, the first included (1: no retry). */
    max_attempts: number;
    backoff_ms: number;
    max_backoff_ms: number;
  };
  health: {
    interval_ms: number;
    timeout_ms: number;
    /** Consecutive failures (probes or calls) that eject a backend. */
    unhealthy_after: number;
    /** Consecutive successful probes that bring it back. */
    healthy_after: number;
  };
  logging: {
    level: LogLevel;
    /** One JSON line per request. */
    requests: boolean;
    /** Include prompt text in request logs (off: prompts never reach logs). */
    log_prompts: boolean;
  };
  backends: BackendConfig[];
}

export const DEFAULT_CONFIG: GatewayConfig = {
  server: { host: "127.0.0.1", port: 8080, max_body_bytes: 4 * 1024 * 1024, max_in_flight: 0, request_timeout_ms: 0, idle_timeout_s: 10, shutdown_grace_s: 25, max_prompt_tokens: 0, reasoning_parser: "auto" },
  auth: { api_keys: [], keys: [], pepper: "" },
  redis: { url: "" },
  responses: { store: "auto", max_entries: 10_000, max_bytes: 256 * 1024 * 1024, ttl_s: 86_400, max_chain: 256 },
  batches: { dir: "", max_file_bytes: 100 * 1024 * 1024, max_requests: 50_000, concurrency: 16, priority: 0 },
  discovery: { mode: "static", namespace: "", label_selector: "", port_name: "rpc", api_server: "" },
  routing: { policy: "dispatch", affinity_slack_ms: 20 },
  upstream: { connect_timeout_ms: 3000 },
  retry: { max_attempts: 3, backoff_ms: 25, max_backoff_ms: 250 },
  health: { interval_ms: 5000, timeout_ms: 2000, unhealthy_after: 2, healthy_after: 1 },
  logging: { level: "info", requests: true, log_prompts: false },
  backends: [],
};

export class ConfigError extends Error {
  override readonly name = "ConfigError";
}

type Check = (v: unknown, path: string) => unknown;

const show = (v: unknown) => JSON.stringify(v) ?? String(v);

const int = (min: number, max: number): Check => (v, path) => {
  const n = typeof v === "string" && /^-?\d+$/.test(v.trim()) ? Number(v) : v;
  if (typeof n !== "number" || !Number.isInteger(n) || n < min || n > max) {
    throw new ConfigError(`config.${path} must be an integer in ${min}..${max}, got ${show(v)}`);
  }
  return n;
};
const str = (nonEmpty = false): Check => (v, path) => {
  if (typeof v !== "string" || (nonEmpty && v === "")) throw new ConfigError(`config.${path} must be a ${nonEmpty ? "non-empty " : ""}string, got ${show(v)}`);
  return v;
};
const bool: Check = (v, path) => {
  if (v === "true" || v === "1") return true;
  if (v === "false" || v === "0") return false;
  if (typeof v !== "boolean") throw new ConfigError(`config.${path} must be true or false, got ${show(v)}`);
  return v;
};
const oneOf = (...values: string[]): Check => (v, path) => {
  if (typeof v !== "string" || !values.includes(v)) throw new ConfigError(`config.${path} must be one of ${values.join(", ")}; got ${show(v)}`);
  return v;
};
const strList: Check = (v, path) => {
  const list = typeof v === "string" ? v.split(",").map((s) => s.trim()).filter(Boolean) : v;
  if (!Array.isArray(list) || list.some((s) => typeof s !== "string" || s === "")) {
    throw new ConfigError(`config.${path} must be a list of non-empty strings, got ${show(v)}`);
  }
  return list;
};
const url: Check = (v, path) => {
  const s = str(true)(v, path) as string;
  let u: URL;
  try {
    u = new URL(s);
  } catch {
    throw new ConfigError(`config.${path} must be an http(s) URL, got ${show(v)}`);
  }
  if (u.protocol !== "http:" && u.protocol !== "https:") throw new ConfigError(`config.${path} must be an http(s) URL, got ${show(v)}`);
  return s.replace(/\/+$/, "");
};

const apiKeys: Check = (v, path) => {
  try {
    return parseConfigKeys(v, path);
  } catch (err) {
    throw new ConfigError((err as Error).message);
  }
};

/** Per section: key -> check. The source of truth for known keys (and for env names). */
export const SECTIONS: Record<Exclude<keyof GatewayConfig, "backends">, Record<string, Check>> = {
  server: {
    host: str(true),
    port: int(0, 65535),
    max_body_bytes: int(1, 1 << 30),
    max_in_flight: int(0, 10_000_000),
    request_timeout_ms: int(0, 86_400_000),
    idle_timeout_s: int(1, 255),
    shutdown_grace_s: int(0, 3600),
    max_prompt_tokens: int(0, 100_000_000),
    reasoning_parser: oneOf("auto", "off"),
  },
  auth: { api_keys: strList, keys: apiKeys, pepper: str() },
  redis: { url: str() },
  responses: { store: oneOf("auto", "memory", "redis", "off"), max_entries: int(1, 10_000_000), max_bytes: int(1024, 2 ** 40), ttl_s: int(1, 31_536_000), max_chain: int(1, 100_000) },
  batches: { dir: str(), max_file_bytes: int(1024, 2 ** 34), max_requests: int(1, 1_000_000), concurrency: int(1, 4096), priority: int(-(2 ** 31), 2 ** 31 - 1) },
  discovery: { mode: oneOf("static", "kubernetes"), namespace: str(), label_selector: str(), port_name: str(), api_server: str() },
  routing: { policy: str(true), affinity_slack_ms: int(0, 600_000) },
  upstream: { connect_timeout_ms: int(0, 600_000) },
  retry: { max_attempts: int(1, 10), backoff_ms: int(0, 60_000), max_backoff_ms: int(0, 600_000) },
  health: { interval_ms: int(50, 3_600_000), timeout_ms: int(10, 600_000), unhealthy_after: int(1, 100), healthy_after: int(1, 100) },
  logging: { level: oneOf("debug", "info", "warn", "error"), requests: bool, log_prompts: bool },
};

const BACKEND_KEYS: Record<string, Check> = {
  id: str(true),
  kind: oneOf("dispatch", "openai"),
  url,
  protocol: oneOf("connect", "grpc", "grpc-web"),
  models: strList,
  api_key: str(),
  metrics_url: url,
};

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** Validate one backend entry (from YAML or parsed from the environment). */
export function checkBackend(raw: unknown, i: number): BackendConfig {
  const path = `backends[${i}]`;
  if (!isPlainObject(raw)) throw new ConfigError(`config.${path} must be a mapping, got ${show(raw)}`);
  for (const k of Object.keys(raw)) {
    if (!(k in BACKEND_KEYS)) throw new ConfigError(`config.${path}.${k} is not a known key (known: ${Object.keys(BACKEND_KEYS).join(", ")})`);
  }
  if (raw.kind === undefined) throw new ConfigError(`config.${path}.kind is required (dispatch or openai)`);
  if (raw.url === undefined) throw new ConfigError(`config.${path}.url is required`);
  const out: Record<string, unknown> = { protocol: "connect", models: [], api_key: "", metrics_url: "" };
  for (const [k, v] of Object.entries(raw)) out[k] = BACKEND_KEYS[k]!(v, `${path}.${k}`);
  out.id ??= `${out.kind}-${i}`;
  const b = out as unknown as BackendConfig;
  if (b.kind === "dispatch" && (b.models.length > 0 || b.api_key || b.metrics_url)) {
    throw new ConfigError(`config.${path}: models, api_key and metrics_url apply to kind openai only (dispatch servers report their model and stream their load)`);
  }
  return b;
}

/** Merge `raw` (parsed YAML) over the defaults, refusing unknown keys and bad values. */
export function validateConfig(raw: unknown): GatewayConfig {
  const cfg: GatewayConfig = structuredClone(DEFAULT_CONFIG);
  if (raw === null || raw === undefined) return cfg;
  if (!isPlainObject(raw)) throw new ConfigError(`config must be a mapping at the top level, got ${show(raw)}`);
  for (const [section, value] of Object.entries(raw)) {
    if (section === "backends") {
      if (!Array.isArray(value)) throw new ConfigError(`config.backends must be a list, got ${show(value)}`);
      cfg.backends = value.map(checkBackend);
      continue;
    }
    const checks = SECTIONS[section as keyof typeof SECTIONS];
    if (!checks) throw new ConfigError(`config.${section} is not a known section (known: ${[...Object.keys(SECTIONS), "backends"].join(", ")})`);
    if (!isPlainObject(value)) throw new ConfigError(`config.${section} must be a mapping, got ${show(value)}`);
    const target = cfg[section as keyof typeof SECTIONS] as Record<string, unknown>;
    for (const [k, v] of Object.entries(value)) {
      const check = checks[k];
      if (!check) throw new ConfigError(`config.${section}.${k} is not a known key (known: ${Object.keys(checks).join(", ")})`);
      target[k] = check(v, `${section}.${k}`);
    }
  }
  return finish(cfg);
}

/** Cross-field checks, run after every override. */
export function finish(cfg: GatewayConfig): GatewayConfig {
  const ids = new Set<string>();
  for (const b of cfg.backends) {
    if (ids.has(b.id)) throw new ConfigError(`config.backends: duplicate id '${b.id}'`);
    ids.add(b.id);
  }
  if (cfg.retry.max_backoff_ms < cfg.retry.backoff_ms) throw new ConfigError("config.retry.max_backoff_ms must be >= config.retry.backoff_ms");
  return cfg;
}

/**
 * Checks across keys that usually come from different sources (the file holds
 * the key hashes, a Secret's env var the pepper): run once, after every override.
 */
export function finishSources(cfg: GatewayConfig): GatewayConfig {
  if (cfg.auth.keys.length > 0 && !cfg.auth.pepper) throw new ConfigError("config.auth.keys needs config.auth.pepper (set DISPATCH_AUTH_PEPPER from a Secret)");
  if (cfg.discovery.mode === "kubernetes" && !cfg.discovery.label_selector) throw new ConfigError("config.discovery.mode kubernetes needs config.discovery.label_selector");
  if (cfg.responses.store === "redis" && !cfg.redis.url) throw new ConfigError("config.responses.store redis needs config.redis.url");
  if (cfg.discovery.api_server && !cfg.discovery.namespace) throw new ConfigError("config.discovery.api_server needs config.discovery.namespace");
  return cfg;
}

/** Set one known leaf (used by env and CLI overrides); `value` is validated like YAML input. */
export function setLeaf(cfg: GatewayConfig, section: keyof typeof SECTIONS, key: string, value: unknown, source: string): void {
  const check = SECTIONS[section][key];
  if (!check) throw new ConfigError(`${source}: unknown key ${section}.${key}`);
  try {
    (cfg[section] as Record<string, unknown>)[key] = check(value, `${section}.${key}`);
  } catch (err) {
    throw new ConfigError(`${source}: ${(err as Error).message}`);
  }
}
