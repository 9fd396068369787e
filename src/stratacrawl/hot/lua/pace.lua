-- Per-source pacing shared by every worker (GCRA-style reservation on Redis' clock), at the
-- source's effective rate: the configured rate times the throttle factor.
-- KEYS[1] the source's next-free timestamp; KEYS[2] its throttle hash.
-- ARGV[1] the arguments by name, as JSON:
--   intervals     the intervals of the turns asked for, one per request, at the
--                 configured rate (s, jittered by the caller): a process reserves the
--                 turns its requests ask for at the same moment in one call, back to back
--   floor         the least interval (robots Crawl-delay, 0 for none)
--   recovery_per_s, hold_wait_s   the throttle's recovery; the longest hold this caller
--                 waits out (s)
--   needed        how many of the turns are needed: the rest are turns ahead, reserved
--                 only while they start within horizon_s of now (at the effective pace,
--                 floor and hold included)
-- Returns the seconds to wait before sending, one per turn reserved, space-separated, or
-- 'held:<s>' when the source is held (Retry-After) for longer than hold_wait_s (nothing is
-- reserved).
-- include: throttle_state
local a = cjson.decode(ARGV[1])
local now = clock()
local factor, hold = throttle_state(KEYS[2], now, a.recovery_per_s)
if hold - now > a.hold_wait_s then
  return 'held:' .. string.format('%.6f', hold - now)
end
local next_free = tonumber(redis.call('GET', KEYS[1]) or '0')
local grant = math.max(now, next_free, hold)
local waits = {}
for _, interval in ipairs(a.intervals) do
  if #waits >= a.needed and grant - now > a.horizon_s then
    break
  end
  waits[#waits + 1] = string.format('%.6f', grant - now)
  grant = grant + math.max(interval / factor, a.floor)
end
redis.call('SET', KEYS[1], string.format('%.6f', grant), 'EX', 3600)
return table.concat(waits, ' ')
