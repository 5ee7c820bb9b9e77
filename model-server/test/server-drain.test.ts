/** SIGTERM drains: running streams finish, new calls are refused, the process exits 0. */
import { expect, test } from "bun:test";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { FinishReason } from "@dispatch/proto/gen/dispatch/v1/generate_pb";
import { ModelService } from "@dispatch/proto/gen/dispatch/v1/model_service_pb";
import { bundledModelDir, startServer } from "./harness";

test("SIGTERM lets a running stream finish, refuses new work with UNAVAILABLE, exits 0", async () => {
  const server = await startServer({ model: bundledModelDir(), args: ["--drain-timeout-s", "20"] });
  const client = createClient(ModelService, createConnectTransport({ baseUrl: server.url, httpVersion: "1.1", useBinaryFormat: true }));
  const prompt = Array.from({ length: 20 }, (_, i) => 100 + i);
  let finish: FinishReason | null = null;
  let n = 0;
  let signalled = false;
  for await (const r of client.generate({ promptTokenIds: prompt, stop: { maxTokens: 200, ignoreEos: true } })) {
    n += r.tokenIds.length;
    if (!signalled && n >= 2) {
      signalled = true;
      server.proc.kill("SIGTERM");
      await Bun.sleep(50);
      const refused = await (async () => {
        try {
          for await (const _ of client.generate({ promptTokenIds: prompt, stop: { maxTokens: 2 } }));
        } catch (e) {
          return ConnectError.from(e).code;
        }
        return null;
      })();
      expect(refused).toBe(Code.Unavailable);
      expect((await fetch(`${server.url}/readyz`)).status).toBe(503);
    }
    if (r.finishReason) finish = r.finishReason;
  }
  expect(finish).toBe(FinishReason.LENGTH);
  expect(n).toBe(200);
  expect(await server.proc.exited).toBe(0);
});
