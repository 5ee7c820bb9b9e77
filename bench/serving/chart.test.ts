import { expect, test } from "bun:test";
import { parseServeLines, renderServeChart } from "./chart";

const run = (c: number, target: string, tokS: number, extra: object = {}) =>
  JSON.stringify({ concurrency: c, target, outputTokS: tokS, ttftMs: { p50: 100 + c }, tpotMs: { p50: 5 + c / 4 }, ...extra });
const LINES = [
  JSON.stringify({ kind: "roofline", perConcurrency: [{ concurrency: 1, rooflineTokS: 700 }, { concurrency: 64, rooflineTokS: 4600 }] }),
  run(1, "gateway", 200),
  run(1, "direct-rpc", 210),
  run(64, "gateway", 2400),
  run(64, "direct-rpc", 2500),
  run(64, "gateway", 1, { phase: "warmup" }),
  "[device-serve] a log line",
].join("\n");

test("measured runs and the roofline are read; warm-ups are left out", () => {
  const d = parseServeLines(LINES);
  expect(d.points.map((p) => `${p.target}@${p.concurrency}:${p.outputTokS}`)).toEqual(["gateway@1:200", "direct-rpc@1:210", "gateway@64:2400", "direct-rpc@64:2500"]);
  expect(d.roofline).toEqual([{ concurrency: 1, tokS: 700 }, { concurrency: 64, tokS: 4600 }]);
});

test("the chart has one line per target and metric, plus the roofline", () => {
  const svg = renderServeChart(parseServeLines(LINES), "t <1>");
  expect(svg.startsWith("<svg")).toBe(true);
  expect(svg).toContain("t &lt;1&gt;");
  expect((svg.match(/<polyline/g) ?? []).length).toBe(2 * 3 + 1);
  expect(svg).toContain("weight-read roofline");
});

test("no measured run is an error, not an empty chart", () => {
  expect(() => renderServeChart(parseServeLines(JSON.stringify({ kind: "roofline", perConcurrency: [] })), "x")).toThrow("no measured serving runs");
});
