/** Renders a benchmark report as docs/gateway-bench.md. */

interface Row {
  rps: number;
  p50_ms: number;
  p99_ms: number;
  errors: number;
}
interface ModeResult {
  max: Record<string, Row>;
  rate: number;
  at_half: Record<string, Row>;
  added: Record<string, { p50_ms: number; p99_ms: number }>;
}
interface Summary {
  dispatch_added_p50_ms: number;
  dispatch_added_p99_ms: number;
  portkey_added_p50_ms: number;
  portkey_added_p99_ms: number;
  throughput_ratio_vs_portkey: number;
  throughput_share_of_direct: number;
  throughput_share_of_minimal_proxy: number;
  minimal_proxy_added_p50_ms: number;
  minimal_proxy_added_p99_ms: number;
}
export interface Report {
  date: string;
  commit?: string;
  command: string;
  machine: { cpus: number; cpu_model: string; bun: string; load_average_before: number[]; load_average_after: number[] };
  settings: { wrk: string; rounds: number; pacing?: string };
  results: Record<string, ModeResult>;
  summary: Record<string, Summary>;
}

const f = (n: number, d = 3) => n.toFixed(d);
const verdict = (ok: boolean) => (ok ? "met" : "**missed**");

/** One line per earlier run kept in bench/gateway/results/, so no run is hidden. */
function history(all: { file: string; report: Report }[]): string[] {
  if (all.length === 0) return [];
  const out = [
    "## Every run kept in bench/gateway/results/",
    "",
    "| date | pacing | load avg before/after (1 min) | stream: x Portkey, added p50 / p99 ms | non-stream: x Portkey, added p50 / p99 ms |",
    "|---|---|---|---|---|",
  ];
  for (const { report: h } of all) {
    const cell = (m: string) => {
      const s = h.summary[m];
      return s ? `${f(s.throughput_ratio_vs_portkey, 2)}x, ${f(s.dispatch_added_p50_ms)} / ${f(s.dispatch_added_p99_ms)}` : "-";
    };
    // Runs before the wall-clock schedule paced wrk with a delay calibrated once per target (drifts under changing load).
    out.push(`| ${h.date} | ${h.settings.pacing ?? "calibrated delay"} | ${f(h.machine.load_average_before[0]!, 2)} / ${f(h.machine.load_average_after[0]!, 2)} | ${cell("stream")} | ${cell("nonstream")} |`);
  }
  out.push("");
  return out;
}

export function renderMarkdown(r: Report, jsonPath: string, all: { file: string; report: Report }[] = []): string {
  const lines: string[] = [];
  lines.push("# Gateway benchmark", "");
  lines.push(`Command: \`${r.command}\` (raw results: \`${jsonPath}\`)${r.commit ? `, at commit ${r.commit}` : ""}.`, "");
  lines.push(
    `Machine: ${r.machine.cpus} cores (${r.machine.cpu_model}), Bun ${r.machine.bun}, shared with other engineers' work; ` +
      `load average before ${r.machine.load_average_before.map((x) => f(x, 2)).join(" / ")}, after ${r.machine.load_average_after.map((x) => f(x, 2)).join(" / ")}. ` +
      `Date: ${r.date}.`,
    "",
  );
  lines.push(
    "Setup: one fast fake OpenAI upstream (Bun.serve, precomputed responses; streaming = 64 content chunks + finish + [DONE]), " +
      "reached directly, through dispatch (the upstream configured as an OpenAI-HTTP backend; default configuration, i.e. the routing policy, " +
      "metrics, request telemetry and per-request JSON logs of that commit), " +
      "through a minimal Bun proxy (`bench/gateway/minimal-proxy.ts`: read body, fetch, pipe back; the cost of one extra Bun hop), " +
      `and through Portkey's gateway 1.15.2 under Bun. Load: ${r.settings.wrk}, one process each, all on the same 2 cores. ` +
      `Each figure is the median of ${r.settings.rounds} interleaved rounds (direct, dispatch, Portkey, direct, ...). ` +
      "Latency is wrk's request-to-last-byte time at a paced rate of half dispatch's maximum throughput in that mode; " +
      "*added* latency is the median over rounds of (gateway percentile - direct percentile) in the same round.",
    "",
  );
  for (const [mode, m] of Object.entries(r.results)) {
    const s = r.summary[mode]!;
    lines.push(`## ${mode === "stream" ? "Streaming (64 chunks)" : "Non-streaming"}`, "");
    lines.push(`| path | max req/s | req/s at ${m.rate} offered | p50 ms | p99 ms | added p50 ms | added p99 ms | errors |`);
    lines.push("|---|---:|---:|---:|---:|---:|---:|---:|");
    for (const name of Object.keys(m.max)) {
      const h = m.at_half[name]!;
      const a = m.added[name];
      const added = a ? [f(a.p50_ms), f(a.p99_ms)] : ["-", "-"];
      // A row whose achieved rate fell short of the offered one was measured saturated.
      const short = h.rps < 0.9 * m.rate ? " (short of offered)" : "";
      lines.push(`| ${name} | ${f(m.max[name]!.rps, 0)} | ${f(h.rps, 0)}${short} | ${f(h.p50_ms)} | ${f(h.p99_ms)} | ${added[0]} | ${added[1]} | ${m.max[name]!.errors + h.errors} |`);
    }
    lines.push("");
    lines.push(
      `Targets: added p50 <= 0.3 ms: ${f(s.dispatch_added_p50_ms)} ms, ${verdict(s.dispatch_added_p50_ms <= 0.3)}; ` +
        `added p99 <= 2 ms: ${f(s.dispatch_added_p99_ms)} ms, ${verdict(s.dispatch_added_p99_ms <= 2)}; ` +
        `max throughput >= 3x Portkey's: ${f(s.throughput_ratio_vs_portkey, 2)}x, ${verdict(s.throughput_ratio_vs_portkey >= 3)}. ` +
        `dispatch reaches ${f(s.throughput_share_of_direct * 100, 0)}% of the direct maximum and ${f(s.throughput_share_of_minimal_proxy * 100, 0)}% of the minimal proxy's; ` +
        `the minimal proxy alone adds ${f(s.minimal_proxy_added_p50_ms)} ms p50 / ${f(s.minimal_proxy_added_p99_ms)} ms p99, so dispatch's own logic accounts for ` +
        `${f(s.dispatch_added_p50_ms - s.minimal_proxy_added_p50_ms)} ms at p50.`,
      "",
    );
  }
  lines.push(
    "Caveats: the machine has 2 cores shared by the load generator, the upstream, the gateway under test and other engineers' builds and tests, " +
      "so absolute figures move between runs; ratios come from the same run. A paced row marked *short of offered* could not sustain the offered rate " +
      "(saturated or starved of CPU); its latency is a saturated one.",
    "",
  );
  lines.push(...history(all));
  return `${lines.join("\n")}\n`;
}
