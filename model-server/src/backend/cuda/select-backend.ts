/**
 * Chooses the compute backend at start. "cpu" never probes; "cuda" requires a usable GPU and
 * fails with the reason; "auto" takes CUDA when the addon loads and sees a device, otherwise
 * the CPU backend, saying why in one log line.
 *
 * @example
 *   const { backend } = selectBackend("auto");   // logs the fallback on a machine without a GPU
 *   const runner = backend === "cuda" ? await createCudaRunner({ dir }) : await createCpuRunner({ dir });
 */
import { ModelLoadError } from "../../loader/errors";
import { probeCuda } from "./native";

export type BackendRequest = "cpu" | "cuda" | "auto";

export interface BackendSelection {
  backend: "cpu" | "cuda";
  /** What was found: the GPU's name, or why CUDA is not used. */
  detail: string;
}

const defaultLog = (line: string) => process.stderr.write(`${line}\n`);

export function selectBackend(requested: BackendRequest, log: (line: string) => void = defaultLog): BackendSelection {
  if (requested === "cpu") return { backend: "cpu", detail: "requested" };
  const probe = probeCuda();
  if (probe.ok) {
    const d = probe.device;
    log(`[model-server] backend cuda: ${d.name} (sm ${d.computeCapability}, ${(d.freeBytes / 2 ** 30).toFixed(1)} of ${(d.totalBytes / 2 ** 30).toFixed(1)} GiB free)`);
    return { backend: "cuda", detail: d.name };
  }
  if (requested === "cuda") throw new ModelLoadError("unsupported_model", `--backend cuda: ${probe.reason}`);
  log(`[model-server] backend auto: CUDA unavailable (${probe.reason}); falling back to the CPU backend`);
  return { backend: "cpu", detail: probe.reason };
}
