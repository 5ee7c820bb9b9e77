import { expect, test } from "bun:test";
import type { Backend } from "./backend";
import { createBackendPool } from "./pool";

const backend = (id: string, models: string[]): Backend => ({
  id,
  kind: "openai",
  url: `http://${id}`,
  models: () => models,
  profile: () => undefined,
  probe: async () => {},
  open: async () => { throw new Error("unused"); },
});

test("ejects after N consecutive failures, returns after M successes", () => {
  const pool = createBackendPool([backend("a", ["m"]), backend("b", ["m"])], { unhealthyAfter: 2, healthyAfter: 2 });
  expect(pool.ready()).toBe(false);
  for (const id of ["a", "b"]) { pool.reportSuccess(id); pool.reportSuccess(id); }
  expect(pool.candidates("m").map((v) => v.id)).toEqual(["a", "b"]);
  pool.reportFailure("a", "x");
  pool.reportCallOk("a");
  pool.reportFailure("a", "x");
  expect(pool.get("a")!.healthy).toBe(true); // the success in between reset the count
  pool.reportFailure("a", "x");
  expect(pool.get("a")!.healthy).toBe(false);
  expect(pool.candidates("m").map((v) => v.id)).toEqual(["b"]);
  expect(pool.knows("m")).toBe(true);
  pool.reportSuccess("a");
  expect(pool.get("a")!.healthy).toBe(false);
  pool.reportSuccess("a");
  expect(pool.candidates("m", new Set(["b"])).map((v) => v.id)).toEqual(["a"]);
});

test("outstanding counts feed the routing views", () => {
  const pool = createBackendPool([backend("a", ["m"])], { unhealthyAfter: 1, healthyAfter: 1 });
  pool.reportSuccess("a");
  pool.acquire("a");
  pool.acquire("a");
  pool.release("a");
  expect(pool.candidates("m")).toEqual([{ id: "a", outstanding: 1 }]);
  expect(pool.models()).toEqual(["m"]);
  expect(pool.knows("other")).toBe(false);
});
