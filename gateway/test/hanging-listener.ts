/**
 * A loopback listener whose connects hang: it never accepts and its accept
 * queue is full (one filler connection with a backlog of 0), so the kernel
 * drops further SYNs and a connect stays in SYN-SENT, as to an address that
 * silently drops packets. Bun.listen and node:net accept at once, so the
 * listener is a python3 process. `acceptAll()` makes it start accepting (the
 * waiting connects complete at their next SYN retransmit, ~1 s after they
 * began), reporting each accepted connection's bytes once its peer closes or resets it.
 *
 * @example
 * const h = await startHangingListener();           // optionally on a given port
 * await Bun.connect({ hostname: "127.0.0.1", port: h.port, ... }); // hangs
 * h.stop();
 */
export interface HangingListener {
  port: number;
  /** Connects to `port` in SYN-SENT, read from /proc/net/tcp (the filler is established, not counted). */
  synSent(): Promise<number>;
  /** Start accepting (the filler first, kept open); `closed` then gets each connection's byte count when it ends. */
  acceptAll(): void;
  /** Byte counts of accepted connections that ended, after acceptAll(). */
  readonly closed: number[];
  stop(): Promise<void>;
}

const SCRIPT = `
import socket, sys, threading
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('127.0.0.1', int(sys.argv[1])))
s.listen(0)
print(s.getsockname()[1], flush=True)
def serve(c):
    n = 0
    while True:
        try:
            b = c.recv(65536)
        except OSError:  # reset (the client terminates sockets it will not use)
            break
        if not b: break
        n += len(b)
    print('closed', n, flush=True)
sys.stdin.readline()  # the test says when to accept
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
`;

export async function startHangingListener(port = 0): Promise<HangingListener> {
  const py = Bun.which("python3");
  if (!py) throw new Error("this test needs python3 for a listener that never accepts");
  const proc = Bun.spawn([py, "-c", SCRIPT, String(port)], { stdin: "pipe", stdout: "pipe" });
  const reader = proc.stdout.getReader();
  const closed: number[] = [];
  let text = "";
  const firstLine = (async () => {
    for (let i = 0; i < 1000 && !text.includes("\n"); i++) {
      const r = await reader.read();
      if (r.done) break;
      text += new TextDecoder().decode(r.value);
    }
    return text.slice(0, text.indexOf("\n"));
  })();
  const bound = Number(await Promise.race([firstLine, Bun.sleep(5000).then(() => "")]));
  if (!(bound > 0)) {
    proc.kill();
    throw new Error("the python3 listener did not start");
  }
  // The rest of stdout: one line per accepted connection that ended.
  void (async () => {
    let rest = text.slice(text.indexOf("\n") + 1);
    for (;;) {
      for (let i = rest.indexOf("\n"); i >= 0; i = rest.indexOf("\n")) {
        const m = /^closed (\d+)$/.exec(rest.slice(0, i));
        if (m) closed.push(Number(m[1]));
        rest = rest.slice(i + 1);
      }
      const r = await reader.read().catch(() => ({ done: true as const, value: undefined }));
      if (r.done) return;
      rest += new TextDecoder().decode(r.value);
    }
  })();
  const filler = await Bun.connect({ hostname: "127.0.0.1", port: bound, socket: { data() {} } });
  const hex = `:${bound.toString(16).toUpperCase().padStart(4, "0")}`;
  return {
    port: bound,
    closed,
    async synSent() {
      const rows = (await Bun.file("/proc/net/tcp").text()).split("\n");
      // sl local remote st: remote address ends in our port, state 02 is SYN_SENT.
      return rows.filter((l) => {
        const f = l.trim().split(/\s+/);
        return f[2]?.endsWith(hex) && f[3] === "02";
      }).length;
    },
    acceptAll() {
      proc.stdin.write("go\n");
      proc.stdin.flush();
    },
    async stop() {
      filler.terminate();
      proc.kill();
      await proc.exited;
    },
  };
}
