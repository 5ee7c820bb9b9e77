/**
 * A redis-server on a fixed loopback port that a test can stop and start
 * again at the same address (common/src/testing/redis.ts starts one per test
 * process and cannot restart it).
 *
 * @example
 * const redis = await startRedis();
 * await redis.stop();
 * await redis.start();
 */
import { redisServerArgv, requireRedisServer, waitForLoopbackPort } from "@dispatch/common/src/testing/redis";
import { freePort } from "./ports";
import { type ManagedProcess, spawnManaged } from "./process";

export interface RedisHandle {
  readonly url: string;
  readonly port: number;
  start(): Promise<void>;
  stop(): Promise<void>;
  running(): boolean;
}

export async function startRedis(): Promise<RedisHandle> {
  requireRedisServer();
  const port = freePort();
  let proc: ManagedProcess | undefined;
  const handle: RedisHandle = {
    url: `redis://127.0.0.1:${port}`,
    port,
    async start() {
      proc = spawnManaged(`redis:${port}`, redisServerArgv(port));
      if (!(await waitForLoopbackPort(port, 5000, 25))) throw new Error(`redis-server did not listen on ${port}:\n${proc.output()}`);
    },
    async stop() {
      await proc?.kill();
      proc = undefined;
    },
    running: () => proc?.alive() ?? false,
  };
  await handle.start();
  return handle;
}
