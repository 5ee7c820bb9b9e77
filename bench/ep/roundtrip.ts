/**
 * GPU check of the native-ep addon against the TypeScript contract: N Bun processes, one per
 * GPU, each a rank of one NCCL group; every rank runs dispatch -> expert e := scale[e] * row ->
 * combine in both modes (`roundTrip`) and compares its output with `runLockstep` (the CPU
 * reference of model-server/src/parallel) over the same seeded inputs of all ranks.
 * Needs a multi-GPU machine, NCCL and the built addon (bun scripts/build-native.ts). Not run yet.
 *
 *   bun bench/ep/roundtrip.ts --ranks 2 [--hidden 256 --experts 16 --topk 4 --tokens 64] [--backend nccl|p2p] [--ll-wire capacity|tokens]
 * (p2p: NVLink peer writes between the processes, buffers shared by cudaIpc)
 * Prints one JSON line per (rank, mode); exits 1 when any max relative error exceeds 2e-2 (bf16 rows).
 */
import { spawn } from "node:child_process";
import type { ExpertWeights } from "../../model-server/src/backend/backend";
import type { ExpertCompute } from "../../model-server/src/parallel/expert-compute";
import { loadNativeEp } from "../../model-server/src/parallel/native-ep";
import { createContiguousPlacement } from "../../model-server/src/parallel/placement";
import { runLockstep, type RankInput } from "../../model-server/src/parallel/testing/lockstep";

const arg = (name: string, def: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : def;
};
const N = arg("ranks", 2);
const H = arg("hidden", 256);
const E = arg("experts", 16);
const K = arg("topk", 4);
const T = arg("tokens", 64);
const backendArg = process.argv.indexOf("--backend");
const BACKEND = backendArg > 0 ? process.argv[backendArg + 1] : "nccl";
if (BACKEND !== "nccl" && BACKEND !== "p2p") throw new Error("--backend must be nccl or p2p");
const wireArg = process.argv.indexOf("--ll-wire");
const LL_WIRE = wireArg > 0 ? process.argv[wireArg + 1] : "capacity";
if (LL_WIRE !== "capacity" && LL_WIRE !== "tokens") throw new Error("--ll-wire must be capacity or tokens");

const bf16 = (f: number) => {
  const b = new Float32Array([f]);
  const u = new Uint32Array(b.buffer);
  u[0] = (u[0]! + 0x7fff + ((u[0]! >>> 16) & 1)) & 0xffff0000;
  return b[0]!;
};

function inputs(rank: number): RankInput {
  let s = 7919 * (rank + 1);
  const rnd = () => ((s = (s * 1103515245 + 12345) % 2147483648) / 2147483648);
  const x = Float32Array.from({ length: T * H }, () => bf16(rnd() * 2 - 1));
  const ids = new Int32Array(T * K);
  const weights = new Float32Array(T * K);
  for (let t = 0; t < T; t++) {
    const chosen: number[] = [];
    while (chosen.length < K) {
      const e = Math.floor(rnd() * E);
      if (!chosen.includes(e)) chosen.push(e);
    }
    chosen.forEach((e, j) => {
      ids[t * K + j] = e;
      weights[t * K + j] = Math.fround(0.05 + rnd());
    });
  }
  return { x, ids, weights };
}

const scale = Float32Array.from({ length: E }, (_, e) => 0.5 + 0.01 * e);
const scaleCompute: ExpertCompute = {
  hidden: H,
  run(_w, local, xs, ys, begin, count) {
    local.forEach((e, le) => {
      for (let r = begin[le]!; r < begin[le]! + count[le]!; r++) for (let h = 0; h < H; h++) ys[r * H + h] = bf16(scale[e]! * xs[r * H + h]!);
    });
  },
};

const child = process.argv.indexOf("--child");
if (child < 0) {
  const ep = loadNativeEp();
  if (!ep) throw new Error("native-ep addon not built (bun scripts/build-native.ts)");
  const id = Buffer.from(ep.uniqueId()).toString("hex");
  const procs = Array.from({ length: N }, (_, r) =>
    spawn(process.execPath, [import.meta.path, ...process.argv.slice(2), "--child", String(r), "--id", id], { stdio: "inherit" }),
  );
  const codes = await Promise.all(procs.map((p) => new Promise<number>((res) => p.on("exit", (c) => res(c ?? 1)))));
  process.exit(codes.every((c) => c === 0) ? 0 : 1);
} else {
  const rank = Number(process.argv[child + 1]);
  const id = Uint8Array.from(Buffer.from(process.argv[process.argv.indexOf("--id") + 1]!, "hex"));
  const ep = loadNativeEp()!;
  const placement = createContiguousPlacement(E, N);
  const g = ep.createGroup({ uniqueId: id, rank, ranks: N, device: rank, numExperts: E, hidden: H, topK: K, placement: Array.from({ length: N }, (_, r) => [...placement.localExperts(r)]), maxTokensHt: T, maxTokensLl: T, backend: BACKEND, llWire: LL_WIRE });
  const all = Array.from({ length: N }, (_, r) => inputs(r));
  const me = all[rank]!;
  let ok = true;
  for (const mode of ["high-throughput", "low-latency"] as const) {
    const got = await ep.roundTrip(g, mode, me.x, me.ids, me.weights, scale);
    const ref = runLockstep(mode, all, K, H, placement, {} as ExpertWeights, scaleCompute, { maxTokensPerRank: T }).out[rank]!;
    let maxRel = 0;
    for (let i = 0; i < ref.length; i++) maxRel = Math.max(maxRel, Math.abs(got[i]! - ref[i]!) / (1 + Math.abs(ref[i]!)));
    console.log(JSON.stringify({ rank, mode, backend: ep.backendName(g), maxRelErr: maxRel }));
    if (!(maxRel <= 2e-2)) ok = false;
  }
  ep.destroyGroup(g);
  process.exit(ok ? 0 : 1);
}
