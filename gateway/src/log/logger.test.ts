import { expect, test } from "bun:test";
import { createLogger } from "./logger";

test("one JSON object per line, levels filtered, batched until flush", () => {
  const out: string[] = [];
  const log = createLogger({ level: "info", write: (t) => void out.push(t) });
  log.debug("hidden");
  log.info("request", { id: "a", n: 1, quote: 'x"y' });
  log.warn("no fields");
  expect(out).toEqual([]);
  log.flush();
  const lines = out.join("").trimEnd().split("\n").map((l) => JSON.parse(l));
  expect(lines.map((l) => [l.level, l.msg])).toEqual([["info", "request"], ["warn", "no fields"]]);
  expect(lines[0]).toMatchObject({ id: "a", n: 1, quote: 'x"y' });
  expect(typeof lines[0].ts).toBe("string");
  log.error("now");
  expect(JSON.parse(out.at(-1)!).msg).toBe("now"); // errors are written at once
});
