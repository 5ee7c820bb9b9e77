/**
 * The benchmark's chart as a self-contained SVG: one column per workload;
 * top row p99 TTFT (log scale) against load, bottom row token-weighted cache
 * hit rate against load; one line per policy.
 */
export interface ChartSeries {
  policy: string;
  /** [load, p99 ms, hit rate] per load. */
  points: Array<[number, number, number]>;
}

export interface ChartPanel {
  workload: string;
  series: ChartSeries[];
}

const COLORS = ["#000000", "#d62728", "#1f77b4", "#9ecae1", "#2ca02c", "#ff7f0e", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22"];
const W = 270;
const H = 210;
const PAD = { l: 52, r: 10, t: 26, b: 34 };

export function renderChart(panels: ChartPanel[], title: string): string {
  const policies = [...new Set(panels.flatMap((p) => p.series.map((s) => s.policy)))];
  const color = (p: string) => COLORS[policies.indexOf(p) % COLORS.length]!;
  const legendH = 24;
  const width = panels.length * W;
  const height = 2 * H + legendH + 30;
  const parts: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="10">`,
    `<rect width="100%" height="100%" fill="white"/>`,
    `<text x="${width / 2}" y="16" text-anchor="middle" font-size="13">${esc(title)}</text>`,
  ];
  panels.forEach((panel, col) => {
    parts.push(panelSvg(panel, col * W, 24, "p99", color));
    parts.push(panelSvg(panel, col * W, 24 + H, "hit", color));
  });
  let x = 10;
  const y = 2 * H + 40;
  for (const p of policies) {
    parts.push(`<line x1="${x}" y1="${y}" x2="${x + 16}" y2="${y}" stroke="${color(p)}" stroke-width="${p === "dispatch" ? 3 : 1.5}"/>`);
    parts.push(`<text x="${x + 20}" y="${y + 3}">${esc(p)}</text>`);
    x += 28 + p.length * 5.6;
  }
  parts.push("</svg>");
  return parts.join("\n");
}

function panelSvg(panel: ChartPanel, ox: number, oy: number, kind: "p99" | "hit", color: (p: string) => string): string {
  const loads = [...new Set(panel.series.flatMap((s) => s.points.map((p) => p[0])))].sort((a, b) => a - b);
  const values = panel.series.flatMap((s) => s.points.map((p) => (kind === "p99" ? p[1] : p[2])));
  const pw = W - PAD.l - PAD.r;
  const ph = H - PAD.t - PAD.b;
  const xAt = (load: number) => ox + PAD.l + (loads.length === 1 ? pw / 2 : ((load - loads[0]!) / (loads[loads.length - 1]! - loads[0]!)) * pw);
  let yAt: (v: number) => number;
  const ticks: Array<[number, string]> = [];
  if (kind === "p99") {
    const lo = Math.floor(Math.log10(Math.max(1, Math.min(...values))));
    const hi = Math.ceil(Math.log10(Math.max(10, Math.max(...values))));
    yAt = (v) => oy + PAD.t + ph - ((Math.log10(Math.max(1, v)) - lo) / Math.max(1, hi - lo)) * ph;
    for (let e = lo; e <= hi; e++) ticks.push([10 ** e, e >= 3 ? `${10 ** (e - 3)} s` : `${10 ** e} ms`]);
  } else {
    yAt = (v) => oy + PAD.t + ph - v * ph;
    for (const v of [0, 0.25, 0.5, 0.75, 1]) ticks.push([v, v.toFixed(2)]);
  }
  const out: string[] = [];
  out.push(`<text x="${ox + W / 2}" y="${oy + 14}" text-anchor="middle" font-size="11">${esc(panel.workload)}: ${kind === "p99" ? "p99 TTFT" : "cache hit rate"}</text>`);
  out.push(`<rect x="${ox + PAD.l}" y="${oy + PAD.t}" width="${pw}" height="${ph}" fill="none" stroke="#ccc"/>`);
  for (const [v, label] of ticks) {
    const y = yAt(v);
    out.push(`<line x1="${ox + PAD.l}" y1="${y}" x2="${ox + PAD.l + pw}" y2="${y}" stroke="#eee"/>`);
    out.push(`<text x="${ox + PAD.l - 4}" y="${y + 3}" text-anchor="end">${label}</text>`);
  }
  for (const l of loads) out.push(`<text x="${xAt(l)}" y="${oy + H - PAD.b + 14}" text-anchor="middle">${Math.round(l * 100)}%</text>`);
  out.push(`<text x="${ox + PAD.l + pw / 2}" y="${oy + H - 6}" text-anchor="middle">load (share of capacity)</text>`);
  for (const s of panel.series) {
    const pts = s.points.map((p) => `${xAt(p[0]).toFixed(1)},${yAt(kind === "p99" ? p[1] : p[2]).toFixed(1)}`).join(" ");
    const w = s.policy === "dispatch" ? 3 : 1.5;
    out.push(`<polyline points="${pts}" fill="none" stroke="${color(s.policy)}" stroke-width="${w}"/>`);
  }
  return out.join("\n");
}

function esc(s: string): string {
  return s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}
