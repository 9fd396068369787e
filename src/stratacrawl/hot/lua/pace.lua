-- Per-source pacing shared by every worker (GCRA-style reservation on Redis' clock), at the
-- source's effective rate: the configured rate times the throttle factor that 429s lower.
-- KEYS[1] the source's next-free timestamp; KEYS[2] its throttle hash (factor, at, hold).
-- ARGV[1] the intervals of the turns asked for, space-separated, one per request, at the
-- configured rate (s, jittered by the caller): a process reserves the turns its requests
-- ask for at the same moment in one call, back to back;
-- ARGV[2] a floor for each interval (robots Crawl-delay, 0 for none); ARGV[3] the factor's
-- recovery per second; ARGV[4] the longest hold this caller waits out (s);
-- ARGV[5] how many of the turns are needed (the rest are turns ahead, reserved only while
-- they start within ARGV[6] seconds of now: at the effective pace, floor and hold included).
-- Returns the seconds to wait before sending, one per turn reserved, space-separated, or
-- 'held:<s>' when the source is held (Retry-After) for longer than ARGV[4] (nothing is
-- reserved).
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1e6
local th = redis.call('HMGET', KEYS[2], 'factor', 'at', 'hold')
local factor = 1.0
if th[1] then
  factor = math.min(1.0, tonumber(th[1]) + (now - tonumber(th[2])) * tonumber(ARGV[3]))
end
local hold = tonumber(th[3] or '0')
if hold - now > tonumber(ARGV[4]) then
  return 'held:' .. string.format('%.6f', hold - now)
end
local floor = tonumber(ARGV[2])
local next_free = tonumber(redis.call('GET', KEYS[1]) or '0')
local grant = math.max(now, next_free, hold)
local needed = tonumber(ARGV[5])
local horizon = tonumber(ARGV[6])
local waits = {}
for interval in string.gmatch(ARGV[1], '%S+') do
  if #waits >= needed and grant - now > horizon then
    break
  end
  waits[#waits + 1] = string.format('%.6f', grant - now)
  grant = grant + math.max(tonumber(interval) / factor, floor)
end
redis.call('SET', KEYS[1], string.format('%.6f', grant), 'EX', 3600)
return table.concat(waits, ' ')
