import { expect, test } from "bun:test";
import { loadFromMetrics, parsePrometheusText } from "./prometheus-load";

const vllm = `# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 3.0
vllm:num_requests_running{engine="1",model_name="m"} 2.0
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="m"} 4.0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.625
vllm:request_success_total{finished_reason="stop",model_name="m"} 12.0
vllm:e2e_request_latency_seconds_bucket{le="+Inf",model_name="m"} 12.0
`;

const sglang = `# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="m"} 7.0
sglang:num_queue_reqs{model_name="m"} 1.0
sglang:token_usage{model_name="m"} 0.25
`;

test("vLLM gauges, summed over engines", () => {
  expect(loadFromMetrics(vllm)).toEqual({ running: 5, waiting: 4, queuedPrefillTokens: 0, kvBlocksUsed: 625, kvBlocksTotal: 1000 });
});

test("older vLLM KV gauge name and SGLang gauges", () => {
  expect(loadFromMetrics("vllm:num_requests_running 1\nvllm:gpu_cache_usage_perc 0.5\n")).toMatchObject({ running: 1, waiting: 0, kvBlocksUsed: 500 });
  expect(loadFromMetrics(sglang)).toEqual({ running: 7, waiting: 1, queuedPrefillTokens: 0, kvBlocksUsed: 250, kvBlocksTotal: 1000 });
});

test("pages without the gauges, NaN and junk lines", () => {
  expect(loadFromMetrics("process_cpu_seconds_total 3\n")).toBeUndefined();
  const g = parsePrometheusText("a 1\na{x=\"1\"} 2 1700000000\nb NaN\nnot a metric line at all\n");
  expect(g.get("a")).toBe(3);
  expect(g.has("b")).toBe(false);
});
