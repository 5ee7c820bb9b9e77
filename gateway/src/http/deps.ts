/** What the HTTP layer is built from (see `gateway.ts` for the wiring). */
import type { AccessControl } from "../auth/access-control";
import type { GatewayConfig } from "../config/schema";
import type { Logger } from "../log/logger";
import type { Metrics } from "../metrics";
import type { FileStore } from "../batches/file-store";
import type { ConversationStore } from "../responses/conversations";
import type { ResponseStore } from "../responses/store";
import type { BackendPool } from "../workers/pool";
import type { RequestTelemetryFactory } from "../telemetry/request-telemetry";
import type { RequestRouter } from "../workers/request-router";

export interface GatewayDeps {
  config: GatewayConfig;
  pool: BackendPool;
  router: RequestRouter;
  log: Logger;
  metrics: Metrics;
  /** Hashed API keys and per-key limits (absent: only `auth.api_keys`, no limits). */
  access?: AccessControl;
  /** Request spans and the per-request production metrics (absent: none). */
  telemetry?: RequestTelemetryFactory;
  /** Stored responses for /v1/responses (absent: `responses.store` off, every request stateless). */
  responses?: ResponseStore;
  /** Conversations for /v1/conversations and `conversation` on responses (absent with `responses.store` off). */
  conversations?: ConversationStore;
  /** Uploaded files and batch outputs (absent: no Files and Batch APIs). */
  files?: FileStore;
}
