/**
 * A runner as the engine sees it, recording which method each step called; `logitsOnly` hides forwardSampled (and
 * with it chaining and sampling extras), so the same runner serves as the logits + host-sampling reference in GPU tests.
 *
 * @example
 * const host = runnerView(cudaRunner, true); // host.runner: forward only; host.calls: ["forward", ...]
 */
import type { CudaModelRunner } from "../../model/cuda-runner";
import type { ModelRunner } from "../../model/runner";

export function runnerView(r: CudaModelRunner, logitsOnly: boolean): { runner: ModelRunner & { forwardSampled?: CudaModelRunner["forwardSampled"] }; calls: string[] } {
  const calls: string[] = [];
  const v: ModelRunner & { forwardSampled?: CudaModelRunner["forwardSampled"] } = {
    spec: r.spec,
    backend: r.backend,
    allocateKv: (n, b) => r.allocateKv(n, b),
    kvBytesPerBlock: (b) => r.kvBytesPerBlock(b),
    exportKv: (ids) => r.exportKv(ids),
    importKv: (ids, kv) => r.importKv(ids, kv),
    close: () => {},
    forward: (s) => (calls.push("forward"), r.forward(s)),
  };
  if (!logitsOnly) v.forwardSampled = (s, g) => (calls.push("forwardSampled"), r.forwardSampled(s, g));
  return { runner: v, calls };
}
