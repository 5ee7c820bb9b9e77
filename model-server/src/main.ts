/**
 * The model server's entry point: parse flags, listen at once (health answers
 * NOT_SERVING while the weights load), load the model, size the KV cache,
 * start the engine, serve. Ctrl-C / SIGTERM drain: new work is refused
 * (UNAVAILABLE, /readyz 503), running sequences get up to --drain-timeout-s to
 * finish, the rest are cancelled, the listeners close. A second signal exits at once.
 *
 *   bun model-server/src/main.ts --model model-server/models/<dir> --port 50051
 *
 * Readiness: the line `[model-server] ready: serving "<model>" at http://HOST:PORT`
 * on stdout, `GET /readyz` answering 200, or Health returning SERVING.
 */
import { createEngine } from "./engine/engine";
import { chooseKvBlocks } from "./kv-sizing";
import { loadServedModel } from "./rpc/load-model";
import { batchLimits, OptionsError, parseOptions, stepTimeoutS, usage, type ServerOptions } from "./rpc/options";
import { startRpcServer } from "./rpc/server";
import { createServingState } from "./rpc/serving-state";
import { describeListenError } from "@dispatch/common/src/listen-error";
import { startTracing } from "@dispatch/common/src/telemetry/start-tracing";

const log = (msg: string) => process.stderr.write(`[model-server] ${msg}\n`);

export async function main(argv: string[], env: Record<string, string | undefined>): Promise<number> {
  let o: ServerOptions;
  try {
    o = parseOptions(argv, env);
  } catch (e) {
    if (!(e instanceof OptionsError)) throw e;
    process.stderr.write(`model-server: ${e.message}\n\n${usage()}`);
    return 2;
  }
  if (o.help) {
    process.stdout.write(usage());
    return 0;
  }

  const tracing = startTracing({ serviceName: "dispatch-model-server", env });
  const state = createServingState();
  state.setLoading(`loading ${o.model}`);
  let server: Awaited<ReturnType<typeof startRpcServer>>;
  try {
    server = await startRpcServer({ state, host: o.host, port: o.port, grpcPort: o.grpcPort });
  } catch (e) {
    const reason = describeListenError(e, o.host, o.port);
    if (!reason) throw e;
    log(reason);
    await tracing.shutdown();
    return 1;
  }
  log(`listening at ${server.url}${server.grpcUrl ? ` (gRPC h2c at ${server.grpcUrl})` : ""}; loading ${o.model}`);

  // First signal: drain (refuse new work, let running sequences finish for up to
  // --drain-timeout-s); a second signal stops at once.
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) {
      log(`${signal} again: stopping now`);
      process.exit(1);
    }
    stopping = true;
    state.setDraining(`shutting down (${signal})`);
    log(`${signal}: draining (up to ${o.drainTimeoutS} s)`);
    const cancelled = (await state.engine?.drain(o.drainTimeoutS * 1000)) ?? 0;
    if (cancelled > 0) log(`cancelled ${cancelled} sequences still running at the drain timeout`);
    await server.stop();
    await tracing.shutdown();
    process.exit(0);
  };
  process.on("SIGINT", () => void stop("SIGINT"));
  process.on("SIGTERM", () => void stop("SIGTERM"));

  try {
    // under EP a GPU may get a whole step's tokens (all sequences on one rank), so each is sized for the step
    // a failed collective step leaves the GPUs out of step: stop serving (readiness and health
    // report it, so the gateway ejects this server and an orchestrator restarts it)
    const onFatal = (m: string) => {
      log(`fatal: ${m}`);
      state.setFailed(m);
    };
    const ep = o.ep > 1 ? { ep: o.ep, epLowLatencyTokens: o.epLowLatencyTokens, epMaxTokensPerRank: batchLimits(o, "cuda").maxBatchTokens, onFatal } : {};
    const model = await loadServedModel(o.model, { backend: o.backend, modelId: o.servedModelName, onProgress: (m) => state.setLoading(m), int8Experts: o.int8Experts, ...ep });
    const maxContext = Math.min(model.runner.spec.maxContext, o.maxContext ?? Number.POSITIVE_INFINITY);
    const limits = batchLimits(o, model.runner.backend);
    const kv = chooseKvBlocks(o, model.runner, maxContext);
    const numKvBlocks = kv.blocks;
    log(`KV cache: ${numKvBlocks} blocks of ${o.blockSize} tokens (${((numKvBlocks * model.runner.kvBytesPerBlock(o.blockSize)) / 2 ** 30).toFixed(2)} GiB), from ${kv.source}`);
    const engine = createEngine({
      runner: model.runner,
      blockSize: o.blockSize,
      numKvBlocks,
      maxNumSeqs: limits.maxNumSeqs,
      maxBatchTokens: limits.maxBatchTokens,
      maxQueue: o.maxQueue,
      serverId: o.serverId,
      tokenBytes: model.tokenBytes,
      specialTokenIds: model.specialTokenIds,
      specTokens: o.specTokens,
      lookahead: !o.syncDecode,
      maxContext: o.maxContext,
      onStep: (s) => server.metrics.engine.step(s),
      onJsonMask: (s) => server.metrics.engine.jsonMask(s),
      // a step that never returns (a kernel that will not end): fail live requests and report failed, as onFatal
      stepTimeoutMs: stepTimeoutS(o.stepTimeoutS, model.runner.backend) * 1000,
      onStalled: onFatal,
    });
    state.setServing(engine, model.meta);
    const spec = model.runner.spec;
    log(`${spec.architecture} ${spec.numLayers} layers, vocab ${spec.vocabSize}; KV ${numKvBlocks} blocks x ${o.blockSize} tokens; context ${engine.maxLen}; backend ${model.runner.backend}${o.int8Experts && model.runner.backend === "cuda" ? " with int8 experts" : ""}${o.ep > 1 ? ` with expert parallelism over ${o.ep} GPUs` : ""}; steps of up to ${limits.maxNumSeqs} sequences / ${limits.maxBatchTokens} tokens`);
    process.stdout.write(`[model-server] ready: serving "${spec.modelId}" at ${server.url}\n`);
  } catch (e) {
    const msg = e instanceof Error ? e.message : String(e);
    state.setFailed(msg);
    log(`failed to load ${o.model}: ${msg}`);
    await server.stop();
    return 1;
  }
  return await new Promise<number>(() => {}); // serve until a signal
}

if (import.meta.main) {
  const code = await main(process.argv.slice(2), process.env);
  process.exit(code);
}
