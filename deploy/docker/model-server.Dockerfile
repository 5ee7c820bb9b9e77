# syntax=docker/dockerfile:1.7
# dispatch model server: CUDA runtime + Bun + the native addons (CPU backend
# and the Hopper MoE kernels). The CUDA runtime is linked statically into the
# addon, so the same image also runs the CPU backend on a node without a GPU.
#
#   docker build -f deploy/docker/model-server.Dockerfile -t dispatch-model-server:0.1.0 .
#   docker run --rm --gpus all -p 50051:50051 -v /models/qwen3:/models/model:ro dispatch-model-server:0.1.0
ARG CUDA_VERSION=13.0.0
ARG UBUNTU=ubuntu24.04

# ---- build: npm deps, Bun, the addons ----
FROM nvidia/cuda:${CUDA_VERSION}-devel-${UBUNTU} AS build
RUN apt-get update -qq \
 && apt-get install -y -qq --no-install-recommends cmake g++ make python3 nodejs npm ca-certificates xz-utils \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY package.json package-lock.json ./
COPY common/package.json common/
COPY proto/package.json proto/
COPY gateway/package.json gateway/
COPY model-server/package.json model-server/
COPY kernels/package.json kernels/
COPY bench/package.json bench/
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY scripts ./scripts
COPY common ./common
COPY proto ./proto
COPY kernels ./kernels
COPY model-server ./model-server
RUN node_modules/@oven/bun-linux-x64/bin/bun scripts/build-native.ts --force \
 && cp node_modules/@oven/bun-linux-x64/bin/bun /usr/local/bin/bun \
 && npm prune --omit=dev --ignore-scripts --no-audit --no-fund \
 && rm -rf node_modules/bun node_modules/@oven node_modules/cmake-js \
 && for d in kernels/build model-server/native/build; do if [ -d "$d" ]; then find "$d" -type f ! -name '*.node' -delete; fi; done

# ---- runtime ----
FROM nvidia/cuda:${CUDA_VERSION}-runtime-${UBUNTU}
RUN groupadd --system --gid 10001 dispatch \
 && useradd --system --uid 10001 --gid dispatch --home-dir /app --shell /usr/sbin/nologin dispatch
WORKDIR /app
COPY --from=build /usr/local/bin/bun /usr/local/bin/bun
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/package.json /app/tsconfig.json ./
COPY --from=build /app/common ./common
COPY --from=build /app/proto ./proto
COPY --from=build /app/kernels ./kernels
COPY --from=build /app/model-server ./model-server
ENV DISPATCH_MS_HOST=0.0.0.0 \
    DISPATCH_MS_PORT=50051 \
    DISPATCH_MODEL_PATH=/models/model \
    NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility
USER 10001:10001
EXPOSE 50051
# /healthz answers while weights load; allow a long start.
HEALTHCHECK --interval=15s --timeout=3s --start-period=600s --retries=3 \
  CMD ["bun", "-e", "fetch('http://127.0.0.1:'+(process.env.DISPATCH_MS_PORT||50051)+'/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
ENTRYPOINT ["bun", "model-server/src/main.ts"]
