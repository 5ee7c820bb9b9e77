import { expect, test } from "bun:test";
import { describeListenError } from "./listen-error";

test("listen failures are named with the address; other errors are not listen failures", () => {
  expect(describeListenError({ code: "EADDRINUSE" }, "127.0.0.1", 8080)).toBe(
    "cannot listen on 127.0.0.1:8080: the port is in use (another server, or a previous one still stopping)",
  );
  expect(describeListenError({ code: "EACCES" }, "0.0.0.0", 80)).toContain("cannot listen on 0.0.0.0:80: no permission");
  expect(describeListenError({ code: "EADDRNOTAVAIL" }, "10.9.9.9", 1)).toContain("no such address");
  expect(describeListenError(new Error("boom"), "h", 1)).toBeUndefined();
  expect(describeListenError(null, "h", 1)).toBeUndefined();
  // node:net's error names the port it failed on
  expect(describeListenError({ code: "EADDRINUSE", address: "127.0.0.1", port: 50051 }, "127.0.0.1", 8000)).toContain("127.0.0.1:50051");
});

test("Bun.serve's error on a taken port is recognised", () => {
  const first = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("x") });
  try {
    let described: string | undefined;
    try {
      Bun.serve({ hostname: "127.0.0.1", port: first.port, fetch: () => new Response("y") }).stop(true);
    } catch (e) {
      described = describeListenError(e, "127.0.0.1", first.port!);
    }
    expect(described).toBe(`cannot listen on 127.0.0.1:${first.port}: the port is in use (another server, or a previous one still stopping)`);
  } finally {
    first.stop(true);
  }
});
