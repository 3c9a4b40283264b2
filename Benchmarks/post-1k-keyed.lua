-- wrk script: POST a 1 KiB JSON body with `Outbox-Ordering-Key: kN`, N round robin over KEYS
-- (environment, default 16), so the stored operations spread over that many lanes.
--   KEYS=16 wrk -t2 -c64 -d10s -s post-1k-keyed.lua http://127.0.0.1:19103/echo
local keys = tonumber(os.getenv("KEYS") or "16")
local pad = 1024 - #'{"data":""}'
local body = '{"data":"' .. string.rep("x", pad) .. '"}'
assert(#body == 1024)
local n = 0
request = function()
  n = n + 1
  return wrk.format("POST", nil, {["Content-Type"] = "application/json", ["Outbox-Ordering-Key"] = "k" .. (n % keys)}, body)
end
