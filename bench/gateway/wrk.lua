-- POST load for wrk: body and headers from the environment; an optional
-- request rate (WRK_RATE, req/s) kept by a wall-clock schedule, so the offered
-- rate holds even when the machine gets busier or quieter mid-run; and a JSON
-- summary line with exact percentiles from wrk's latency histogram.
wrk.method = "POST"
wrk.body = os.getenv("WRK_BODY")
wrk.headers["Content-Type"] = "application/json"
local extra = os.getenv("WRK_HEADERS") or ""
for k, v in string.gmatch(extra, "([^:|]+):([^|]+)") do
  wrk.headers[k] = v
end

local rate = tonumber(os.getenv("WRK_RATE") or "0")
local ffi = require("ffi")
ffi.cdef[[
  typedef struct { long tv_sec; long tv_nsec; } wrk_timespec;
  int clock_gettime(int clk_id, wrk_timespec *tp);
]]
local ts = ffi.new("wrk_timespec")
local function now_ms()
  ffi.C.clock_gettime(1, ts) -- CLOCK_MONOTONIC
  return tonumber(ts.tv_sec) * 1000 + tonumber(ts.tv_nsec) / 1e6
end

-- Each request takes the next slot of a global schedule, one slot every
-- 1000/rate ms; a connection waits until its slot (never for a missed one).
local slot = nil
function delay()
  if rate <= 0 then return 0 end
  local t = now_ms()
  if slot == nil or slot < t then slot = t end
  slot = slot + 1000 / rate
  return math.floor(slot - t)
end

function done(summary, latency, requests)
  local errors = summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.status + summary.errors.timeout
  io.write(string.format(
    'WRK_JSON {"requests":%d,"duration_us":%d,"bytes":%d,"errors":%d,"non2xx":%d,"p50_us":%d,"p90_us":%d,"p99_us":%d,"max_us":%d,"mean_us":%.1f}\n',
    summary.requests, summary.duration, summary.bytes, errors, summary.errors.status,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max, latency.mean))
end
