-- One request (or a batch, for a single limit) held to every limit in KEYS,
-- all or nothing. KEYS, three per limit: its state hash, its log list (sliding
-- log), its tier key (plans). ARGV: now in microseconds ('' for Redis's own
-- TIME), the number of limits, the units, a write flag ('1', or '0' to only
-- read), the shortest TTL to set in microseconds (0: exactly the state's
-- useful life), then per limit: the tier the caller expects ('*' for none to check),
-- the algorithm ('f', 's', 't'), limit, window (us), burst, rule version.
-- Returns per limit {allowed, remaining, retry_after, reset_after}, or
-- {'tier', index, actual} when a plan's tier is not the one expected.

local now
if ARGV[1] == '' then
  local time = redis.call('TIME')
  now = tonumber(time[1]) * 1000000 + tonumber(time[2])
else
  now = tonumber(ARGV[1])
end
local limits = tonumber(ARGV[2])
local units = tonumber(ARGV[3])
local write = ARGV[4] == '1'
minimum_ttl = tonumber(ARGV[5])

local function field(index, offset)
  return ARGV[5 + (index - 1) * 6 + offset]
end

for index = 1, limits do
  local expected = field(index, 1)
  if expected ~= '*' then
    local actual = redis.call('GET', KEYS[(index - 1) * 3 + 3]) or 'default'
    if actual ~= expected then
      return {'tier', index, actual}
    end
  end
end

local function decide(index, units, write)
  local algorithm = field(index, 2)
  local limit = tonumber(field(index, 3))
  local window = tonumber(field(index, 4))
  local burst = tonumber(field(index, 5))
  local version = field(index, 6)
  local key = KEYS[(index - 1) * 3 + 1]
  if algorithm == 'f' then
    return fixed_window(key, version, limit, window, now, units, write)
  elseif algorithm == 's' then
    return sliding_log(key, KEYS[(index - 1) * 3 + 2], version, limit, window, now, units, write)
  else
    return token_bucket(key, version, limit, window, burst, now, units, write)
  end
end

local results = {}
if limits == 1 then
  local allowed, remaining, retry_after, reset_after = decide(1, units, write)
  results[1] = {allowed, remaining, retry_after, reset_after}
  return results
end

-- Several limits: check every one with nothing taken, then take one unit from
-- each only if all allow it.
local checks = {}
local everyone = true
for index = 1, limits do
  local _, remaining, _, reset_after = decide(index, 0, false)
  checks[index] = {remaining, reset_after}
  if remaining < 1 then
    everyone = false
  end
end
for index = 1, limits do
  if everyone or checks[index][1] < 1 then
    local allowed, remaining, retry_after, reset_after = decide(index, 1, write)
    results[index] = {allowed, remaining, retry_after, reset_after}
  else
    results[index] = {0, checks[index][1], 0, checks[index][2]}
  end
end
return results
