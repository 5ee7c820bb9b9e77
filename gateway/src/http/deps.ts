/** What the HTTP layer is built from (see `gateway.ts` for the wiring). */
import type { GatewayConfig } from "../config/schema";
import type { Logger } from "../log/logger";
import type { Metrics } from "../metrics";
import type { BackendPool } from "../workers/pool";
import type { Router } from "../workers/router";

export interface GatewayDeps {
  config: GatewayConfig;
  pool: BackendPool;
  router: Router;
  log: Logger;
  metrics: Metrics;
}
