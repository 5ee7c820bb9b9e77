#!/usr/bin/env node
// The two README commands land here (`npm start`, `npm test`). Runs under the
// machine's Node so it works before Bun exists: installs what is missing, then
// hands over to Bun.
import { spawn, spawnSync } from "node:child_process";
import { existsSync, statSync } from "node:fs";
import { constants } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const [command, ...args] = process.argv.slice(2);

function run(cmd, argv, opts = {}) {
  const r = spawnSync(cmd, argv, { stdio: "inherit", cwd: root, ...opts });
  if (r.error) throw r.error;
  return r.status ?? 1;
}

/**
 * Runs the long-lived command the wrapper exists for (the server, the test run) and exits with its status (128 + the
 * signal's number when a signal ended it). SIGTERM and SIGHUP sent to this wrapper alone (a process manager, `kill
 * PID`, a closed terminal) reach the command as SIGTERM, which it handles by draining and stopping its own children,
 * instead of leaving it running without a parent. SIGINT is not passed on:
 * Ctrl-C reaches the whole foreground process group, the command included, and a second SIGINT would make the
 * servers stop at once instead of draining; the wrapper only waits for the command to exit.
 */
function handOver(cmd, argv, opts = {}) {
  const child = spawn(cmd, argv, { stdio: "inherit", cwd: root, ...opts });
  for (const signal of ["SIGTERM", "SIGHUP"]) process.on(signal, () => child.kill("SIGTERM"));
  process.on("SIGINT", () => {});
  child.on("error", (e) => {
    log(`could not run ${cmd}: ${e.message}`);
    process.exit(1);
  });
  child.on("exit", (code, signal) => process.exit(code ?? 128 + (constants.signals[signal] ?? 0)));
}

function log(msg) {
  process.stderr.write(`[dispatch] ${msg}\n`);
}

/** npm dependencies: installed when node_modules is missing or older than the lockfile. */
function ensureNodeModules() {
  const marker = join(root, "node_modules", ".package-lock.json");
  const lock = join(root, "package-lock.json");
  if (existsSync(marker) && (!existsSync(lock) || statSync(marker).mtimeMs >= statSync(lock).mtimeMs)) return;
  log("installing npm dependencies (first run)...");
  const status = run("npm", [existsSync(lock) ? "ci" : "install", "--no-audit", "--no-fund", "--loglevel=error"]);
  if (status !== 0) throw new Error(`npm install failed with status ${status}`);
}

/** The Bun binary shipped inside the `bun` npm package (works with or without install scripts). */
function bunPath() {
  const candidates = [
    join(root, "node_modules", "@oven", "bun-linux-x64", "bin", "bun"),
    join(root, "node_modules", "@oven", "bun-linux-x64-baseline", "bin", "bun"),
    join(root, "node_modules", "@oven", "bun-linux-aarch64", "bin", "bun"),
    join(root, "node_modules", "bun", "bin", "bun.exe"),
  ];
  for (const c of candidates) {
    if (!existsSync(c)) continue;
    const r = spawnSync(c, ["--version"], { encoding: "utf8" });
    if (r.status === 0) return c;
  }
  throw new Error("no working Bun binary under node_modules (is the `bun` package installed?)");
}

/** A Debian package, when its command is missing and apt is usable (CI and fresh machines run as root). */
function ensureDebian(commandName, pkg) {
  if (spawnSync("sh", ["-c", `command -v ${commandName}`]).status === 0) return true;
  if (spawnSync("sh", ["-c", "command -v apt-get"]).status !== 0) return false;
  log(`installing ${pkg} from Debian...`);
  const sudo = process.getuid?.() === 0 ? [] : ["sudo", "-n"];
  const env = { ...process.env, DEBIAN_FRONTEND: "noninteractive" };
  const install = () => run(sudo[0] ?? "apt-get", [...sudo.slice(1), ...(sudo.length ? ["apt-get"] : []), "install", "-y", "-qq", pkg], { env, stdio: "ignore" });
  if (install() !== 0) {
    run(sudo[0] ?? "apt-get", [...sudo.slice(1), ...(sudo.length ? ["apt-get"] : []), "update", "-qq"], { env, stdio: "ignore" });
    install();
  }
  return spawnSync("sh", ["-c", `command -v ${commandName}`]).status === 0;
}

function main() {
  ensureNodeModules();
  const bun = bunPath();
  const env = { ...process.env, PATH: `${dirname(bun)}:${process.env.PATH}` };
  switch (command) {
    case "start":
      return handOver(bun, ["scripts/start.ts", ...args], { env });
    case "test": {
      if (!ensureDebian("redis-server", "redis-server")) log("redis-server unavailable: tests that need Redis will fail");
      if (run(bun, ["scripts/build-native.ts"], { env }) !== 0) process.exit(1);
      return handOver(bun, ["test", ...args], { env });
    }
    case "bun":
      return handOver(bun, args, { env });
    default:
      log(`unknown command ${command ?? "(none)"}; use start | test | bun`);
      process.exit(2);
  }
}

main();
