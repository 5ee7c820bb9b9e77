-- POST load for wrk: body and headers from the environment; a per-request
-- delay (ms, dithered so fractional means work) for rate-limited runs; and a
-- JSON summary line with exact percentiles from wrk's latency histogram.
wrk.method = "POST"
wrk.body = os.getenv("WRK_BODY")
wrk.headers["Content-Type"] = "application/json"
local extra = os.getenv("WRK_HEADERS") or ""
for k, v in string.gmatch(extra, "([^:|]+):([^|]+)") do
  wrk.headers[k] = v
end

local delay_ms = tonumber(os.getenv("WRK_DELAY_MS") or "0")
local base = math.floor(delay_ms)
local frac = delay_ms - base

function delay()
  if delay_ms <= 0 then return 0 end
  if math.random() < frac then return base + 1 end
  return base
end

function done(summary, latency, requests)
  local errors = summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.status + summary.errors.timeout
  io.write(string.format(
    'WRK_JSON {"requests":%d,"duration_us":%d,"bytes":%d,"errors":%d,"non2xx":%d,"p50_us":%d,"p90_us":%d,"p99_us":%d,"max_us":%d,"mean_us":%.1f}\n',
    summary.requests, summary.duration, summary.bytes, errors, summary.errors.status,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max, latency.mean))
end
