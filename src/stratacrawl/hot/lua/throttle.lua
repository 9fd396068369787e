-- A source answered "too many requests" (429, or 503 with Retry-After): lower its
-- effective rate for every worker (multiplicative decrease; pace.lua lets it recover
-- additively with time) and hold the whole source for Retry-After.
-- KEYS[1] the throttle hash (factor, at, hold, cut).
-- ARGV[1] Retry-After (s, 0 for none); ARGV[2] decrease factor (e.g. 0.5); ARGV[3] lowest
-- factor; ARGV[4] recovery per second; ARGV[5] the least time between two decreases (the
-- requests already in flight answer 429 too: one burst is one signal, not twenty).
-- Returns the factor now in force.
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1e6
local th = redis.call('HMGET', KEYS[1], 'factor', 'at', 'hold', 'cut')
local factor = 1.0
if th[1] then
  factor = math.min(1.0, tonumber(th[1]) + (now - tonumber(th[2])) * tonumber(ARGV[4]))
end
local hold = tonumber(th[3] or '0')
local cut = tonumber(th[4] or '0')
if now - cut >= tonumber(ARGV[5]) then
  factor = math.max(tonumber(ARGV[3]), factor * tonumber(ARGV[2]))
  cut = now
end
local retry_after = tonumber(ARGV[1])
if retry_after > 0 then hold = math.max(hold, now + retry_after) end
redis.call('HSET', KEYS[1], 'factor', string.format('%.6f', factor),
           'at', string.format('%.6f', now), 'hold', string.format('%.6f', hold),
           'cut', string.format('%.6f', cut))
redis.call('EXPIRE', KEYS[1], 86400)
return string.format('%.6f', factor)
