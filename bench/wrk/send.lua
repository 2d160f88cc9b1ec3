-- wrk script: POST /v1/send to a running sendonce.
--   SENDONCE_API_KEY=so_… wrk -t2 -c64 -d10s -s bench/wrk/send.lua http://127.0.0.1:8787
-- Every request carries a new Idempotency-Key unless WRK_KEYS=N is set, in
-- which case the requests cycle over N keys per thread: after the first
-- round, every request is a replay.
local threads = {}

function setup(thread)
  thread:set("tid", #threads + 1)
  table.insert(threads, thread)
end

function init(args)
  counter = 0
  keys = tonumber(os.getenv("WRK_KEYS") or "0")
  prefix = string.format("wrk-%d-%d-%d-", os.time(), math.random(1000000), tid)
  if keys > 0 then
    prefix = string.format("wrk-replay-%d-", tid)
  end
  headers = {
    ["Content-Type"] = "application/json",
    ["Authorization"] = "Bearer " .. (os.getenv("SENDONCE_API_KEY") or ""),
  }
  body = '{"to":"load@example.com","subject":"Load test","text":"Hello from wrk."}'
end

function request()
  counter = counter + 1
  local n = counter
  if keys > 0 then
    n = counter % keys
  end
  headers["Idempotency-Key"] = prefix .. n
  return wrk.format("POST", "/v1/send", headers, body)
end

function done(summary, latency, requests)
  io.write(string.format("p50 %.2fms p99 %.2fms p99.9 %.2fms non-2xx %d\n",
    latency:percentile(50) / 1000, latency:percentile(99) / 1000, latency:percentile(99.9) / 1000,
    summary.errors.status))
end
