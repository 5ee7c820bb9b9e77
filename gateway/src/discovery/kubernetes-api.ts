/**
 * Minimal Kubernetes API access over fetch, for the in-cluster case: the API
 * server from KUBERNETES_SERVICE_HOST/PORT, the pod's service-account token
 * (re-read every minute: projected tokens rotate), its CA, its namespace. No
 * client library: discovery needs one list and one watch.
 *
 * @example
 * const api = inClusterApi();
 * const res = await api.get("/apis/discovery.k8s.io/v1/namespaces/ai/endpointslices?labelSelector=x%3Dy");
 */
import { readFileSync } from "node:fs";

export const SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount";

export interface KubernetesApiOptions {
  /** e.g. https://10.96.0.1:443; in-cluster default from KUBERNETES_SERVICE_HOST/PORT. */
  server: string;
  tokenPath?: string;
  /** PEM of the API server's CA (https only). */
  ca?: string;
  now?: () => number;
}

export interface KubernetesApi {
  readonly server: string;
  get(path: string, signal?: AbortSignal): Promise<Response>;
}

export class KubernetesApiError extends Error {
  override readonly name = "KubernetesApiError";
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

export function createKubernetesApi(o: KubernetesApiOptions): KubernetesApi {
  const now = o.now ?? Date.now;
  let token: string | undefined;
  let tokenReadAt = -Infinity;
  const bearer = () => {
    if (!o.tokenPath) return undefined;
    if (now() - tokenReadAt > 60_000) {
      token = readFileSync(o.tokenPath, "utf8").trim();
      tokenReadAt = now();
    }
    return token;
  };
  return {
    server: o.server,
    async get(path, signal) {
      const t = bearer();
      const res = await fetch(o.server.replace(/\/+$/, "") + path, {
        headers: { accept: "application/json", ...(t ? { authorization: `Bearer ${t}` } : {}) },
        signal,
        ...(o.ca ? { tls: { ca: o.ca } } : {}),
      });
      if (!res.ok) {
        const body = await res.text().catch(() => "");
        let message = body.slice(0, 300);
        try {
          message = (JSON.parse(body) as { message?: string }).message ?? message;
        } catch {}
        throw new KubernetesApiError(res.status, `GET ${path.split("?")[0]}: ${res.status} ${message}`);
      }
      return res;
    },
  };
}

/** The API as seen from inside a pod; throws a clear error outside a cluster. */
export function inClusterApi(env: Record<string, string | undefined> = process.env): { api: KubernetesApi; namespace: string } {
  const host = env.KUBERNETES_SERVICE_HOST;
  const port = env.KUBERNETES_SERVICE_PORT ?? "443";
  if (!host) throw new Error("kubernetes discovery: KUBERNETES_SERVICE_HOST is not set (not running in a pod?)");
  const ns = readFileSync(`${SERVICE_ACCOUNT_DIR}/namespace`, "utf8").trim();
  const ca = readFileSync(`${SERVICE_ACCOUNT_DIR}/ca.crt`, "utf8");
  const server = `https://${host.includes(":") ? `[${host}]` : host}:${port}`;
  return { api: createKubernetesApi({ server, tokenPath: `${SERVICE_ACCOUNT_DIR}/token`, ca }), namespace: ns };
}
