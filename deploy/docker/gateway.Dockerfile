# syntax=docker/dockerfile:1.7
# dispatch gateway: Bun + the gateway's TypeScript sources and production npm
# dependencies. Small, non-root, read-only-root friendly.
#
#   docker build -f deploy/docker/gateway.Dockerfile -t dispatch-gateway:0.1.0 .
#   docker run --rm -p 8080:8080 -e DISPATCH_BACKENDS=dispatch=http://host.docker.internal:50051 dispatch-gateway:0.1.0
ARG BUN_VERSION=1.4.5

# ---- dependencies: npm ci against the committed lockfile, production only ----
FROM node:22-bookworm-slim AS deps
WORKDIR /app
COPY package.json package-lock.json ./
COPY common/package.json common/
COPY proto/package.json proto/
COPY gateway/package.json gateway/
COPY model-server/package.json model-server/
COPY kernels/package.json kernels/
COPY bench/package.json bench/
# --ignore-scripts: no native builds in the gateway image. The bun npm package's
# binary is dropped: the runtime stage brings its own Bun.
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund \
 && rm -rf node_modules/bun node_modules/@oven node_modules/cmake-js node_modules/node-addon-api

# ---- runtime ----
FROM oven/bun:${BUN_VERSION}-distroless
WORKDIR /app
COPY --from=deps /app/node_modules ./node_modules
COPY package.json tsconfig.json bunfig.toml ./
COPY common ./common
COPY proto ./proto
COPY gateway ./gateway
ENV NODE_ENV=production \
    DISPATCH_SERVER_HOST=0.0.0.0 \
    DISPATCH_SERVER_PORT=8080
# The distroless image's nonroot user (65532); the chart runs as 10001 via securityContext.
USER 65532:65532
EXPOSE 8080
# No curl in a distroless image: Bun itself checks /healthz.
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
  CMD ["bun", "-e", "fetch('http://127.0.0.1:'+(process.env.DISPATCH_SERVER_PORT||8080)+'/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
ENTRYPOINT ["bun", "gateway/src/main.ts"]
