/**
 * `--served-model-name` on a real model server (the bundled model, CPU): the model is known by that name everywhere,
 * the gateway's model list and requests alike, as vLLM's flag of the same name does.
 */
import { expect, test } from "bun:test";
import { useRealModelServer } from "./real-model-server";

const real = useRealModelServer(() => ["--served-model-name", "acme/tiny-moe"]);

test("the served name is the model's name in the API", async () => {
  expect(real.model).toBe("acme/tiny-moe");
  expect((await real.gw.client.models.retrieve("acme/tiny-moe")).id).toBe("acme/tiny-moe");
  const r = await real.gw.client.chat.completions.create({ model: "acme/tiny-moe", messages: [{ role: "user", content: "hi" }], max_tokens: 4 });
  expect(r.model).toBe("acme/tiny-moe");
  expect(r.usage!.completion_tokens).toBeGreaterThan(0);
});
