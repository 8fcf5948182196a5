-- Requests held to their limits, one after another, each all or nothing:
-- concurrent requests share one call. ARGV: now in microseconds ('' for
-- Redis's own TIME), the shortest TTL to set in microseconds (0: exactly the
-- state's useful life), the number of requests; then per request: its number
-- of limits, its units (several limits take 1), a write flag ('1', or '0' to
-- only read), and per limit: the tier the caller expects ('*' for none to
-- check), the algorithm ('f', 's', 't'), limit, window (us), burst, rule
-- version. KEYS, three per limit in the same order: its state, its log list
-- (sliding log), its tier key (plans).
-- Returns per request either {{allowed, remaining, retry_after, reset_after},
-- ...} (one per limit), {'tier', index, actual} when a plan's tier is not the
-- one expected (nothing of that request is decided), or {'error', message}.

local now
if ARGV[1] == '' then
  local time = redis.call('TIME')
  now = tonumber(time[1]) * 1000000 + tonumber(time[2])
else
  now = tonumber(ARGV[1])
end
minimum_ttl = tonumber(ARGV[2])

-- Limit, window and burst of each rule version, read once per call.
local rules = {}
local function rule(at)
  local version = ARGV[at + 6]
  local known = rules[version]
  if known == nil then
    known = {tonumber(ARGV[at + 3]), tonumber(ARGV[at + 4]), tonumber(ARGV[at + 5])}
    rules[version] = known
  end
  return known[1], known[2], known[3], version
end

-- One request whose limit fields start at ARGV[base + 1] and keys at
-- KEYS[first + 1].
local function handle(limits, units, write, base, first)
  local function field(index, offset)
    return ARGV[base + (index - 1) * 6 + offset]
  end
  local function key(index, offset)
    return KEYS[first + (index - 1) * 3 + offset]
  end
  -- Each limit's state and tier, in one call each.
  local states = {}
  for index = 1, limits do
    local found = redis.call('MGET', key(index, 1), key(index, 3))
    local expected = field(index, 1)
    if expected ~= '*' then
      local actual = found[2] or 'default'
      if actual ~= expected then
        return {'tier', index, actual}
      end
    end
    states[index] = found[1]
  end
  local function decide(index, units, write)
    local algorithm = field(index, 2)
    local limit, window, burst, version = rule(base + (index - 1) * 6)
    local state = states[index]
    if algorithm == 'f' then
      return fixed_window(key(index, 1), state, version, limit, window, now, units, write)
    elseif algorithm == 's' then
      return sliding_log(key(index, 1), key(index, 2), state, version, limit, window, now, units, write)
    else
      return token_bucket(key(index, 1), state, version, limit, window, burst, now, units, write)
    end
  end
  if limits == 1 then
    local allowed, remaining, retry_after, reset_after = decide(1, units, write)
    return {{allowed, remaining, retry_after, reset_after}}
  end
  -- Several limits: check every one with nothing taken (writing the state
  -- back tidied, expired runs dropped, which changes no decision), then take
  -- one unit from each only if all allow it.
  local results = {}
  local checks = {}
  local everyone = true
  for index = 1, limits do
    local _, remaining, _, reset_after, tidied = decide(index, 0, write)
    states[index] = tidied
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
end

local replies = {}
local base = 4
local first = 0
for request = 1, tonumber(ARGV[3]) do
  local limits = tonumber(ARGV[base])
  local units = tonumber(ARGV[base + 1])
  local write = ARGV[base + 2] == '1'
  -- A failing request fails alone, not the call it shares.
  local ok, reply = pcall(handle, limits, units, write, base + 2, first)
  if ok then
    replies[request] = reply
  else
    if type(reply) == 'table' and reply.err then
      reply = reply.err
    end
    replies[request] = {'error', tostring(reply)}
  end
  base = base + 3 + limits * 6
  first = first + limits * 3
end
return replies
