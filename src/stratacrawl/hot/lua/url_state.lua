-- Hot URL state of a batch of URLs in one call (a pipeline of HSETs cost ~12 us a URL in
-- the client, mostly reading one reply per command).
-- KEYS: the re-referenced URLs' keys, then the written URLs' keys.
-- ARGV[1] number of re-referenced keys, ARGV[2] access stamp; then, per written key, its
-- fields as one string: field and value pairs joined by the unit separator (\31).
-- Re-referenced: one more hit, accessed now. Written: the fields set (promotion or update).
local touched = tonumber(ARGV[1])
for i = 1, touched do
  redis.call('HINCRBY', KEYS[i], 'h', 1)
  redis.call('HSET', KEYS[i], 'la', ARGV[2])
end
for i = touched + 1, #KEYS do
  local packed = ARGV[i - touched + 2]
  if packed ~= '' then
    local pairs, from = {}, 1
    while true do
      local at = string.find(packed, '\31', from, true)
      if not at then
        pairs[#pairs + 1] = string.sub(packed, from)
        break
      end
      pairs[#pairs + 1] = string.sub(packed, from, at - 1)
      from = at + 1
    end
    redis.call('HSET', KEYS[i], unpack(pairs))
  end
end
return #KEYS
