-- Pop up to N due task ids from a source's ready queue and lease them.
-- KEYS[1] ready zset, KEYS[2] leased zset (same hash tag: one source)
-- ARGV[1] now (epoch s), ARGV[2] N, ARGV[3] lease expiry (epoch s)
-- Scores are (10 - priority) * 1e10 + due epoch: higher priority first, then earliest due.
-- Returns the ids, then the number of ids left in the window (so callers know when to refill).
local now = tonumber(ARGV[1])
local want = tonumber(ARGV[2])
local out = {}
for band = 0, 10 do
  if #out >= want then break end
  local lo = band * 1e10
  local ids = redis.call('ZRANGEBYSCORE', KEYS[1], lo, lo + now, 'LIMIT', 0, want - #out)
  for _, id in ipairs(ids) do
    out[#out + 1] = id
  end
  if #ids > 0 then
    redis.call('ZREM', KEYS[1], unpack(ids))
    local leased = {}
    for _, id in ipairs(ids) do
      leased[#leased + 1] = ARGV[3]
      leased[#leased + 1] = id
    end
    redis.call('ZADD', KEYS[2], unpack(leased))
  end
end
out[#out + 1] = redis.call('ZCARD', KEYS[1])
return out
