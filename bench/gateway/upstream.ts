/**
 * The benchmark's upstream: the fake OpenAI-compatible server of
 * `fake-upstream.ts` on Bun.serve, in its own process.
 *
 *   bun bench/gateway/upstream.ts --port N
 */
import { fakeUpstreamFetch } from "./fake-upstream";

const port = Number(process.argv[process.argv.indexOf("--port") + 1] || 0);
const server = Bun.serve({ hostname: "127.0.0.1", port, fetch: fakeUpstreamFetch });
console.log(JSON.stringify({ upstream: `http://127.0.0.1:${server.port}` }));
