-- A cluster-wide concurrency slot of a source (one per batch in flight).
-- KEYS[1] zset of holders (score = expiry); ARGV[1] holder, ARGV[2] max, ARGV[3] ttl (s).
-- Returns 1 when the slot is held (or renewed), 0 when the source is at its limit.
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1e6
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZSCORE', KEYS[1], ARGV[1]) or redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[2]) then
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[1])
  redis.call('EXPIRE', KEYS[1], math.ceil(tonumber(ARGV[3])) + 60)
  return 1
end
return 0
