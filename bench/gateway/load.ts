/**
 * Runs wrk (Debian's) against one target: closed-loop for maximum
 * throughput, or paced to a request rate for latency at a given load. The
 * Lua script (wrk.lua) prints exact percentiles from wrk's histogram.
 */
import { spawnSync } from "node:child_process";

export interface Target {
  name: string;
  url: string;
  headers: Record<string, string>;
}

export interface WrkResult {
  requests: number;
  rps: number;
  errors: number;
  non2xx: number;
  p50_ms: number;
  p90_ms: number;
  p99_ms: number;
  max_ms: number;
  mean_ms: number;
}

const LUA = new URL("./wrk.lua", import.meta.url).pathname;

/** Install wrk from Debian when it is missing (the bench machine runs as root). */
export function ensureWrk(): void {
  if (spawnSync("sh", ["-c", "command -v wrk"]).status === 0) return;
  const sudo = process.getuid?.() === 0 ? "" : "sudo -n ";
  const env = { ...process.env, DEBIAN_FRONTEND: "noninteractive" };
  console.error("[bench] installing wrk from Debian...");
  let r = spawnSync("sh", ["-c", `${sudo}apt-get install -y -qq wrk`], { env, stdio: "inherit" });
  if (r.status !== 0) {
    spawnSync("sh", ["-c", `${sudo}apt-get update -qq`], { env, stdio: "inherit" });
    r = spawnSync("sh", ["-c", `${sudo}apt-get install -y -qq wrk`], { env, stdio: "inherit" });
  }
  if (spawnSync("sh", ["-c", "command -v wrk"]).status !== 0) throw new Error("wrk is not installed and apt-get could not install it");
}

/** `rate` (req/s): paced by wrk.lua's wall-clock schedule; absent: closed loop, as fast as it goes. */
export function wrk(t: Target, body: string, o: { connections: number; seconds: number; rate?: number }): WrkResult {
  const headers = Object.entries(t.headers).map(([k, v]) => `${k}:${v}`).join("|");
  const r = spawnSync(
    "wrk",
    ["-t1", `-c${o.connections}`, `-d${o.seconds}s`, "--timeout", "10s", "-s", LUA, t.url],
    { env: { ...process.env, WRK_BODY: body, WRK_HEADERS: headers, WRK_RATE: String(o.rate ?? 0) }, encoding: "utf8" },
  );
  const line = r.stdout.split("\n").find((l) => l.startsWith("WRK_JSON "));
  if (!line) throw new Error(`wrk failed for ${t.name}: ${r.stdout}\n${r.stderr}`);
  const j = JSON.parse(line.slice(9));
  return {
    requests: j.requests,
    rps: j.requests / (j.duration_us / 1e6),
    errors: j.errors,
    non2xx: j.non2xx,
    p50_ms: j.p50_us / 1000,
    p90_ms: j.p90_us / 1000,
    p99_ms: j.p99_us / 1000,
    max_ms: j.max_us / 1000,
    mean_ms: j.mean_us / 1000,
  };
}

