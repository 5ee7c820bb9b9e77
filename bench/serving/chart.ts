/**
 * The serving benchmark's chart as a self-contained SVG, from device-serve's JSON lines: three
 * panels against concurrency (log2 axis): output tokens/s of each target beside the weight-read
 * roofline, TTFT p50 and TPOT p50 of each target (log axes). Lines that are warm-ups or
 * overhead repeats (a `phase` field) are left out.
 *
 *   bun bench/serving/chart.ts serve.jsonl "Qwen3-30B-A3B shape, one H200" > docs/serving-chart.svg
 */
import { readFileSync } from "node:fs";

export interface ServePoint {
  concurrency: number;
  target: string;
  outputTokS: number;
  ttftP50: number;
  tpotP50: number;
}

export interface ServeData {
  points: ServePoint[];
  roofline: Array<{ concurrency: number; tokS: number }>;
}

/** Picks the measured runs and the roofline out of device-serve's stdout. */
export function parseServeLines(text: string): ServeData {
  const points: ServePoint[] = [];
  const roofline: ServeData["roofline"] = [];
  for (const line of text.split("\n")) {
    if (!line.trim().startsWith("{")) continue;
    const r = JSON.parse(line);
    if (r.kind === "roofline" && Array.isArray(r.perConcurrency)) {
      for (const p of r.perConcurrency) roofline.push({ concurrency: p.concurrency, tokS: p.rooflineTokS });
    } else if (typeof r.concurrency === "number" && typeof r.target === "string" && r.phase === undefined && r.ttftMs && r.tpotMs) {
      points.push({ concurrency: r.concurrency, target: r.target, outputTokS: r.outputTokS, ttftP50: r.ttftMs.p50, tpotP50: r.tpotMs.p50 });
    }
  }
  return { points, roofline };
}

const COLORS: Record<string, string> = { gateway: "#d62728", "direct-rpc": "#1f77b4", roofline: "#7f7f7f" };
const W = 300;
const H = 230;
const PAD = { l: 56, r: 12, t: 26, b: 36 };

type Metric = "outputTokS" | "ttftP50" | "tpotP50";
const TITLES: Record<Metric, string> = { outputTokS: "output tokens/s", ttftP50: "TTFT p50 (ms)", tpotP50: "TPOT p50 (ms)" };

export function renderServeChart(data: ServeData, title: string): string {
  if (data.points.length === 0) throw new Error("no measured serving runs in the input");
  const targets = [...new Set(data.points.map((p) => p.target))];
  const metrics: Metric[] = ["outputTokS", "ttftP50", "tpotP50"];
  const width = metrics.length * W;
  const height = H + 60;
  const parts = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="10">`,
    `<rect width="100%" height="100%" fill="white"/>`,
    `<text x="${width / 2}" y="16" text-anchor="middle" font-size="13">${esc(title)}</text>`,
  ];
  metrics.forEach((m, i) => parts.push(panel(data, targets, m, i * W, 22)));
  let x = 12;
  const y = H + 44;
  for (const name of [...targets, ...(data.roofline.length ? ["roofline"] : [])]) {
    const dash = name === "roofline" ? ` stroke-dasharray="4 3"` : "";
    parts.push(`<line x1="${x}" y1="${y}" x2="${x + 16}" y2="${y}" stroke="${COLORS[name] ?? "#2ca02c"}" stroke-width="2"${dash}/>`);
    const label = name === "roofline" ? "weight-read roofline" : name;
    parts.push(`<text x="${x + 20}" y="${y + 3}">${esc(label)}</text>`);
    x += 34 + label.length * 5.6;
  }
  parts.push("</svg>");
  return parts.join("\n");
}

function panel(data: ServeData, targets: string[], m: Metric, ox: number, oy: number): string {
  const conc = [...new Set(data.points.map((p) => p.concurrency))].sort((a, b) => a - b);
  const series = targets.map((t) => ({
    name: t,
    pts: data.points.filter((p) => p.target === t).sort((a, b) => a.concurrency - b.concurrency).map((p) => [p.concurrency, p[m]] as [number, number]),
  }));
  if (m === "outputTokS" && data.roofline.length) {
    series.push({ name: "roofline", pts: data.roofline.filter((r) => conc.includes(r.concurrency)).map((r) => [r.concurrency, r.tokS] as [number, number]) });
  }
  const values = series.flatMap((s) => s.pts.map((p) => p[1])).filter((v) => v > 0);
  const lo = Math.floor(Math.log10(Math.min(...values)));
  const hi = Math.max(lo + 1, Math.ceil(Math.log10(Math.max(...values))));
  const pw = W - PAD.l - PAD.r;
  const ph = H - PAD.t - PAD.b;
  const c0 = Math.log2(conc[0]!);
  const c1 = Math.log2(conc[conc.length - 1]!);
  const xAt = (c: number) => ox + PAD.l + (c1 === c0 ? pw / 2 : ((Math.log2(c) - c0) / (c1 - c0)) * pw);
  const yAt = (v: number) => oy + PAD.t + ph - ((Math.log10(Math.max(v, 10 ** lo)) - lo) / (hi - lo)) * ph;
  const out = [
    `<text x="${ox + W / 2}" y="${oy + 14}" text-anchor="middle" font-size="11">${TITLES[m]}</text>`,
    `<rect x="${ox + PAD.l}" y="${oy + PAD.t}" width="${pw}" height="${ph}" fill="none" stroke="#ccc"/>`,
  ];
  for (let e = lo; e <= hi; e++) {
    const y = yAt(10 ** e);
    out.push(`<line x1="${ox + PAD.l}" y1="${y}" x2="${ox + PAD.l + pw}" y2="${y}" stroke="#eee"/>`);
    out.push(`<text x="${ox + PAD.l - 4}" y="${y + 3}" text-anchor="end">${(10 ** e).toLocaleString("en-US")}</text>`);
  }
  for (const c of conc) out.push(`<text x="${xAt(c)}" y="${oy + H - PAD.b + 14}" text-anchor="middle">${c}</text>`);
  out.push(`<text x="${ox + PAD.l + pw / 2}" y="${oy + H - 6}" text-anchor="middle">concurrency</text>`);
  for (const s of series) {
    if (s.pts.length === 0) continue;
    const pts = s.pts.map(([c, v]) => `${xAt(c).toFixed(1)},${yAt(v).toFixed(1)}`).join(" ");
    const dash = s.name === "roofline" ? ` stroke-dasharray="4 3"` : "";
    out.push(`<polyline points="${pts}" fill="none" stroke="${COLORS[s.name] ?? "#2ca02c"}" stroke-width="2"${dash}/>`);
    for (const [c, v] of s.pts) out.push(`<circle cx="${xAt(c).toFixed(1)}" cy="${yAt(v).toFixed(1)}" r="2.5" fill="${COLORS[s.name] ?? "#2ca02c"}"/>`);
  }
  return out.join("\n");
}

function esc(s: string): string {
  return s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

if (import.meta.main) {
  const [file, title] = process.argv.slice(2);
  if (!file) {
    console.error('usage: bun bench/serving/chart.ts <device-serve stdout (JSON lines)> ["title"]');
    process.exit(2);
  }
  process.stdout.write(renderServeChart(parseServeLines(readFileSync(file, "utf8")), title ?? "dispatch serving benchmark") + "\n");
}
