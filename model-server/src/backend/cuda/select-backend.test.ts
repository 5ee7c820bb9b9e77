import { expect, test } from "bun:test";
import { probeCuda } from "./native";
import { selectBackend } from "./select-backend";

const gpu = probeCuda().ok;

test("cpu is taken as asked, without probing or logging", () => {
  const lines: string[] = [];
  expect(selectBackend("cpu", (l) => lines.push(l))).toEqual({ backend: "cpu", detail: "requested" });
  expect(lines).toEqual([]);
});

test.skipIf(gpu)("auto without a GPU falls back to the CPU backend with one clear log line", () => {
  const lines: string[] = [];
  const s = selectBackend("auto", (l) => lines.push(l));
  expect(s.backend).toBe("cpu");
  expect(lines.length).toBe(1);
  expect(lines[0]).toContain("falling back to the CPU backend");
  expect(lines[0]).toMatch(/no CUDA device|not built|failed to load/);
});

test.skipIf(gpu)("cuda without a GPU is refused with the reason", () => {
  expect(() => selectBackend("cuda", () => {})).toThrow(/--backend cuda: .*(no CUDA device|not built|failed to load)/);
});

test.skipIf(!gpu)("auto with a GPU takes CUDA and names the device", () => {
  const lines: string[] = [];
  expect(selectBackend("auto", (l) => lines.push(l)).backend).toBe("cuda");
  expect(lines[0]).toContain("backend cuda:");
});
