-- Add task ids to a source's ready queue while its window has room, in one call (the
-- list hop waits on it: one round trip instead of a ZCARD and then a ZADD).
-- KEYS[1] ready zset; ARGV[1] the window; then score, id pairs, best first.
-- Returns how many pairs did not fit.
local room = tonumber(ARGV[1]) - redis.call('ZCARD', KEYS[1])
local given = (#ARGV - 1) / 2
local fit = math.max(0, math.min(room, given))
local args = {}
for i = 2, 1 + 2 * fit do  -- ZADD in chunks: unpack has a stack limit
  args[#args + 1] = ARGV[i]
  if #args == 2000 or i == 1 + 2 * fit then
    redis.call('ZADD', KEYS[1], unpack(args))
    args = {}
  end
end
return given - fit
