-- A source answered "too many requests" (429, or 503 with Retry-After): lower its
-- effective rate for every worker (multiplicative decrease; it recovers additively with
-- time, see throttle_state.lua) and hold the whole source for Retry-After.
-- KEYS[1] the throttle hash (factor, at, hold, cut).
-- ARGV[1] the arguments by name, as JSON: retry_after_s (0 for none), decrease (e.g. 0.5),
-- min_factor, recovery_per_s, min_gap_s (the least time between two decreases: the
-- requests already in flight answer 429 too — one burst is one signal, not twenty).
-- Returns the factor now in force.
-- include: throttle_state
local a = cjson.decode(ARGV[1])
local now = clock()
local factor, hold, cut = throttle_state(KEYS[1], now, a.recovery_per_s)
if now - cut >= a.min_gap_s then
  factor = math.max(a.min_factor, factor * a.decrease)
  cut = now
end
if a.retry_after_s > 0 then hold = math.max(hold, now + a.retry_after_s) end
redis.call('HSET', KEYS[1], 'factor', string.format('%.6f', factor),
           'at', string.format('%.6f', now), 'hold', string.format('%.6f', hold),
           'cut', string.format('%.6f', cut))
redis.call('EXPIRE', KEYS[1], 86400)
return string.format('%.6f', factor)
