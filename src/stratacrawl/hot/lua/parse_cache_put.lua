-- Parse results into the hot tier's parse cache: KEYS are the cache keys (one hash tag:
-- one source), ARGV their values, then the time to live in seconds.
-- One call for a batch of pages: a SET per page through a client pipeline cost the
-- cleaner about three times as much.
local ttl = ARGV[#ARGV]
for i, key in ipairs(KEYS) do
  redis.call('SET', key, ARGV[i], 'EX', ttl)
end
return #KEYS
