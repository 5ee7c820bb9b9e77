import { expect, test } from "bun:test";
import { createProgress } from "./progress";

test("progress reports each new percent once, ends at 100%, and stays off stderr when not a terminal", () => {
  const messages: string[] = [];
  const p = createProgress({ total: 4 * 1048576, label: "loading m", onProgress: (m) => messages.push(m), tty: false });
  p.advance(1048576);
  p.advance(1);
  p.advance(1048576);
  p.done();
  expect(messages).toEqual(["loading m 25% (1.0/4.0 MiB)", "loading m 50% (2.0/4.0 MiB)", "loading m 100% (4.0/4.0 MiB)"]);
});
