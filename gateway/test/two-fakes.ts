/**
 * A test gateway over two connect fakes, "x" and "y", as dispatch backends:
 * the setup the failover and routing-bookkeeping tests share.
 *
 * @example
 * const f = await startGatewayOverTwoFakes({ routing: { policy: "round-robin" } });
 * await f.t.client.chat.completions.create({ model: "fake-moe", messages });
 * await f.stop();
 */
import { type ConnectFake, startConnectFake } from "./fakes/connect-fake";
import { startGateway, type TestGateway } from "./start-gateway";

export interface TwoFakes {
  x: ConnectFake;
  y: ConnectFake;
  t: TestGateway;
  /** Stops the gateway, then both fakes. */
  stop(): Promise<void>;
}

/** `config` is the gateway config without `backends` (routing, retry, server, logging...). */
export async function startGatewayOverTwoFakes(config: Record<string, unknown>): Promise<TwoFakes> {
  const x = await startConnectFake({ serverId: "x" });
  const y = await startConnectFake({ serverId: "y" });
  const t = await startGateway({
    backends: [
      { kind: "dispatch", url: x.url, id: "x" },
      { kind: "dispatch", url: y.url, id: "y" },
    ],
    ...config,
  });
  return {
    x,
    y,
    t,
    async stop() {
      await t.stop();
      x.stop();
      y.stop();
    },
  };
}
