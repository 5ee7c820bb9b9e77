/**
 * Routing state shared across gateway replicas through Redis pub/sub: each
 * replica publishes its routing updates (what it sent where, with the prompt's
 * block hashes and estimated prefill work; first tokens; completions) and
 * applies everyone else's, so every replica's approximate prefix index and
 * in-flight load cover the whole fleet's traffic.
 *
 * Failure policy: Redis is an optimisation, never a dependency.
 * - Every publish has a hard deadline (`deadlineMs`, default 5 ms) and is
 *   fire-and-forget: it never throws and a request never waits for it.
 * - The clients never queue commands while disconnected
 *   (`enableOfflineQueue: false`), so a dead Redis fails each call at once;
 *   ioredis reconnects in the background and the subscription is restored.
 * - While Redis is away every replica routes on its local state alone.
 * Without Redis configured, do not create this: the router works in memory.
 *
 * Wiring:
 *   const shared = createRedisSharedState({ url, replicaId });
 *   const router = createRouter({ ..., onUpdate: (u) => shared.publish(u) });
 *   shared.onRemote((u) => router.applyRemote(u));
 *   await shared.ready(); // optional: false when Redis is unreachable (still fine)
 *
 * @example
 * const shared = createRedisSharedState({ url: "redis://127.0.0.1:6379", replicaId: "gw-1" });
 */
import { Redis, type RedisOptions } from "ioredis";
import type { RoutingUpdate } from "../routing/router";
import { withDeadline } from "./deadline";
import { decodeUpdate, encodeUpdate } from "./update-codec";

export interface RedisSharedStateOptions {
  url: string;
  /** Unique per gateway replica (e.g. the pod name). Default: random. */
  replicaId?: string;
  /** Pub/sub channel. Default "dispatch:routing:v1". */
  channel?: string;
  /** Hard deadline of each Redis call, ms. Default 5. */
  deadlineMs?: number;
  /** Told about each failed or late call (for a log line or a metric); never throws. */
  onError?: (err: unknown) => void;
}

export interface SharedStateStats {
  /** Publishes handed to the client (delivered or not). */
  sent: number;
  /** Publishes Redis acknowledged within the deadline. */
  published: number;
  publishFailed: number;
  received: number;
  dropped: number;
}

export interface SharedState {
  readonly replicaId: string;
  /** Send a local update to the other replicas. Never throws, never waits. */
  publish(update: RoutingUpdate): void;
  /** Deliver other replicas' updates (request ids arrive namespaced by replica). */
  onRemote(handler: (update: RoutingUpdate) => void): void;
  /** Resolves true once connected and subscribed, false if that did not happen within `timeoutMs`. */
  ready(timeoutMs?: number): Promise<boolean>;
  stats(): SharedStateStats;
  close(): Promise<void>;
}

export function createRedisSharedState(options: RedisSharedStateOptions): SharedState {
  const replicaId = options.replicaId ?? `gw-${crypto.randomUUID().slice(0, 8)}`;
  const channel = options.channel ?? "dispatch:routing:v1";
  const deadlineMs = options.deadlineMs ?? 5;
  const report = (err: unknown) => {
    try {
      options.onError?.(err);
    } catch {
      // A broken error hook must not break routing.
    }
  };
  const common: RedisOptions = {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    // Connection setup has its own timeout; each publish gets `deadlineMs` through withDeadline.
    commandTimeout: 1000,
    connectTimeout: 1000,
    enableAutoPipelining: true,
    retryStrategy: (times) => Math.min(50 * times, 1000),
    lazyConnect: true,
    // The ready check's INFO would itself be refused by the disabled offline queue.
    enableReadyCheck: false,
  };
  const pub = new Redis(options.url, common);
  const sub = new Redis(options.url, { ...common, commandTimeout: undefined, enableOfflineQueue: true, autoResubscribe: true });
  pub.on("error", report);
  sub.on("error", report);

  const stats: SharedStateStats = { sent: 0, published: 0, publishFailed: 0, received: 0, dropped: 0 };
  let handler: ((u: RoutingUpdate) => void) | undefined;
  let closed = false;

  sub.on("message", (ch: string, raw: string) => {
    if (ch !== channel) return;
    const decoded = decodeUpdate(raw);
    if (!decoded) {
      stats.dropped += 1;
      return;
    }
    if (decoded.replicaId === replicaId) return;
    stats.received += 1;
    try {
      handler?.(decoded.update);
    } catch (err) {
      report(err);
    }
  });

  // Subscribe on every (re)connection until it has worked once; after that
  // ioredis resubscribes by itself.
  let subscribedOk = false;
  sub.on("ready", () => {
    if (subscribedOk || closed) return;
    sub.subscribe(channel).then(
      () => {
        subscribedOk = true;
      },
      (err) => report(err),
    );
  });
  pub.connect().catch(report);
  sub.connect().catch(report);

  return {
    replicaId,
    publish(update) {
      if (closed) return;
      const msg = encodeUpdate(replicaId, update);
      let sent: Promise<number>;
      try {
        sent = pub.publish(channel, msg);
      } catch (err) {
        stats.publishFailed += 1;
        report(err);
        return;
      }
      stats.sent += 1;
      withDeadline(sent, deadlineMs).then(
        () => {
          stats.published += 1;
        },
        (err) => {
          stats.publishFailed += 1;
          report(err);
        },
      );
    },
    onRemote(h) {
      handler = h;
    },
    async ready(timeoutMs = 1000) {
      const until = Date.now() + timeoutMs;
      while (!(subscribedOk && pub.status === "ready")) {
        if (closed || Date.now() >= until) return false;
        await Bun.sleep(5);
      }
      return true;
    },
    stats: () => ({ ...stats }),
    async close() {
      closed = true;
      pub.disconnect();
      sub.disconnect();
    },
  };
}
