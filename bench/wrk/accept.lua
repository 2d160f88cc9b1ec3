-- wrk script for new-key accepts, the same for sendonce and the yardsticks
-- (bench/compare.sh): every request is POST /v1/send with the small JSON
-- mail {to, subject, text} and an Idempotency-Key never used before (a
-- random UUIDv4 from math.random, seeded per thread). The first script
-- argument, if any, is sent as "Authorization: Bearer <arg>":
--
--   wrk -t2 -c50 -d10s -s bench/wrk/accept.lua http://127.0.0.1:8787/v1/send -- so_SECRET
--
-- A second argument N > 0 sends each request to one of N recipient domains
-- (user@d1.test … user@dN.test, drawn at random) instead of
-- user@example.com, for backlogs spread over destinations (bench/mx.sh).
--
-- Answers are counted by status and only 200 counts as accepted. At the end
-- it prints one line, which compare.sh reads:
--
--   RESULT rps=.. ok_rps=.. requests=.. ok200=.. non200=.. first_non200=.. sock_errors=.. secs=.. p50_ms=.. p99_ms=..
--
-- rps counts every answer, ok_rps only the 200s; first_non200 is the status
-- of the first other answer a thread saw (0: none).
local threads = {}

function setup(thread)
  thread:set("tid", #threads + 1)
  table.insert(threads, thread)
end

-- seed: 4 bytes of /dev/urandom, so that threads and wrk processes started
-- at the same moment (compare.sh runs three at once) draw different keys;
-- the time, the thread number and the CPU clock if it cannot be read.
local function seed()
  local s = os.time() * 1000 + tid * 7919 + math.floor(os.clock() * 1e6)
  local f = io.open("/dev/urandom", "rb")
  if f then
    local b = f:read(4)
    f:close()
    if b and #b == 4 then
      s = ((b:byte(1) * 256 + b:byte(2)) * 256 + b:byte(3)) * 256 + b:byte(4) + tid
    end
  end
  return s
end

function init(args)
  math.randomseed(seed())
  for _ = 1, 10 do math.random() end
  ok200, non200, first_non200 = 0, 0, 0
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
  if args[1] ~= nil and args[1] ~= "" then
    wrk.headers["Authorization"] = "Bearer " .. args[1]
  end
  wrk.body = '{"to":"user@example.com","subject":"Hello","text":"Hello world, this is a small test message body."}'
  domains = tonumber(args[2] or "0") or 0
end

local function hex(n)
  return string.format("%0" .. n .. "x", math.random(0, 16 ^ n - 1))
end

function request()
  -- xxxxxxxx-xxxx-4xxx-[89ab]xxx-xxxxxxxxxxxx
  wrk.headers["Idempotency-Key"] = hex(4) .. hex(4) .. "-" .. hex(4) .. "-4" .. hex(3) .. "-" ..
    string.format("%x", math.random(8, 11)) .. hex(3) .. "-" .. hex(4) .. hex(4) .. hex(4)
  if domains > 0 then
    wrk.body = '{"to":"user@d' .. math.random(1, domains) ..
      '.test","subject":"Hello","text":"Hello world, this is a small test message body."}'
  end
  return wrk.format()
end

function response(status, headers, body)
  if status == 200 then
    ok200 = ok200 + 1
  else
    non200 = non200 + 1
    if first_non200 == 0 then first_non200 = status end
  end
end

function done(summary, latency, requests)
  local ok, bad, first = 0, 0, 0
  for _, t in ipairs(threads) do
    ok = ok + (t:get("ok200") or 0)
    bad = bad + (t:get("non200") or 0)
    if first == 0 then first = t:get("first_non200") or 0 end
  end
  local secs = summary.duration / 1e6
  local e = summary.errors
  io.write(string.format(
    "RESULT rps=%.1f ok_rps=%.1f requests=%d ok200=%d non200=%d first_non200=%d sock_errors=%d secs=%.2f p50_ms=%.3f p99_ms=%.3f\n",
    summary.requests / secs, ok / secs, summary.requests, ok, bad, first,
    e.connect + e.read + e.write + e.timeout, secs,
    latency:percentile(50) / 1000, latency:percentile(99) / 1000))
end
