-- Take or renew concurrency slots of a source: one when a batch starts, all of a
-- process's when its slot keeper renews them (every few seconds).
-- KEYS[1] zset of holders (score = expiry); ARGV[1] max, ARGV[2] ttl (s), ARGV[3..] holders.
-- A holder whose slot expired meanwhile gets it back only while the source has room.
-- Returns how many of the holders hold a slot now.
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1e6
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local held = 0
for i = 3, #ARGV do
  if redis.call('ZSCORE', KEYS[1], ARGV[i]) or redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[1]) then
    redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[i])
    held = held + 1
  end
end
redis.call('EXPIRE', KEYS[1], math.ceil(tonumber(ARGV[2])) + 60)
return held
