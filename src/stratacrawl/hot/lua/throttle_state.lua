-- A source's throttle, as of now — the one place its rule is written; every script that
-- reads a throttle includes this file (``-- include: throttle_state``).
-- The factor multiplies the configured rate: a 429 burst multiplies it down (throttle.lua),
-- and it recovers by `recovery_per_s` each second since its last change, computed here
-- when read (no timer anywhere), up to 1: the configured rate is a ceiling. The hold is a
-- Retry-After: nobody sends to the source before it. `cut` is when the factor was last
-- lowered (one burst of 429s is one signal).
local function clock()
  local t = redis.call('TIME')
  return tonumber(t[1]) + tonumber(t[2]) / 1e6
end

local function throttle_state(key, now, recovery_per_s)
  local th = redis.call('HMGET', key, 'factor', 'at', 'hold', 'cut')
  local factor = 1.0
  if th[1] then
    factor = math.min(1.0, tonumber(th[1]) + (now - tonumber(th[2])) * recovery_per_s)
  end
  return factor, tonumber(th[3] or '0'), tonumber(th[4] or '0'), th[1] ~= false
end
