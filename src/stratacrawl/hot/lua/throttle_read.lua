-- A source's throttle for reports (crawl --json, /metrics, the ops page); it writes nothing.
-- KEYS[1] the throttle hash. ARGV[1] the arguments by name, as JSON: recovery_per_s.
-- Returns "<factor> <seconds still held>", or '' when the source was never throttled.
-- include: throttle_state
local a = cjson.decode(ARGV[1])
local now = clock()
local factor, hold, _, known = throttle_state(KEYS[1], now, a.recovery_per_s)
if not known then
  return ''
end
return string.format('%.6f %.6f', factor, math.max(0, hold - now))
