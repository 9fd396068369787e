-- Per-source pacing shared by every worker (GCRA-style reservation on Redis' clock).
-- KEYS[1] the source's next-free timestamp; ARGV[1] this request's interval (s).
-- Returns the seconds to wait before sending; the slot is reserved either way.
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1e6
local next_free = tonumber(redis.call('GET', KEYS[1]) or '0')
local grant = math.max(now, next_free)
redis.call('SET', KEYS[1], string.format('%.6f', grant + tonumber(ARGV[1])), 'EX', 3600)
return string.format('%.6f', grant - now)
