-- Hot URL state of a batch of URLs in one call (a pipeline of HSETs cost ~12 us a URL in
-- the client, mostly reading one reply per command).
-- KEYS: the re-referenced URLs' keys, then the written URLs' keys.
-- ARGV[1] number of re-referenced keys, ARGV[2] access stamp; then, per written key, its
-- field count n and n field/value pairs.
-- Re-referenced: one more hit, accessed now. Written: the fields set (promotion or update).
local touched = tonumber(ARGV[1])
for i = 1, touched do
  redis.call('HINCRBY', KEYS[i], 'h', 1)
  redis.call('HSET', KEYS[i], 'la', ARGV[2])
end
local a = 3
for i = touched + 1, #KEYS do
  local n = tonumber(ARGV[a])
  if n > 0 then
    redis.call('HSET', KEYS[i], unpack(ARGV, a + 1, a + 2 * n))
  end
  a = a + 1 + 2 * n
end
return #KEYS
