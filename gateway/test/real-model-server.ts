/**
 * A real model server (the bundled tiny model on the CPU backend) with a gateway in front, started before a test
 * file's tests and stopped after them; the fields are there once `beforeAll` ran.
 *
 * @example
 * const real = useRealModelServer();
 * test("...", async () => { await real.gw.client.chat.completions.create({ model: real.model, ... }); });
 */
import { afterAll, beforeAll } from "bun:test";
import { type ModelServerHandle, startModelServer } from "../../test/support/model-server";
import { startGateway, type TestGateway } from "./start-gateway";

export interface RealModelServer {
  server: ModelServerHandle;
  gw: TestGateway;
  /** The served model's id. */
  model: string;
}

/** `args`: more model-server flags (a later `--model` wins over the bundled one). */
export function useRealModelServer(args: () => string[] = () => []): RealModelServer {
  const real = {} as RealModelServer;
  beforeAll(async () => {
    real.server = await startModelServer({ args: args() });
    real.gw = await startGateway({ backends: [{ id: "ms-0", kind: "dispatch", url: real.server.url }] });
    real.model = (await real.gw.client.models.list()).data[0]!.id;
  }, 30_000);
  afterAll(async () => {
    await real.gw?.stop();
    await real.server?.stop();
  });
  return real;
}
