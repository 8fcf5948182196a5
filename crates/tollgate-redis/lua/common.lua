-- Shared by every tollgate script. Numbers are Lua doubles: every quantity here
-- stays below 2^53 (the store refuses policies that could go beyond), so every
-- sum, difference and product is exact, and floor_div corrects the one step
-- where a double division could round. A state is one string value,
-- "version:a:b", read with the key's tier in one MGET and written with its TTL
-- in one SET: each Redis call inside a script costs about as much as all the
-- arithmetic.

-- Numbers become text exactly through string.format('%d') (Lua's own
-- conversion, used by `..` and tostring, keeps only 14 significant digits);
-- numbers passed to redis.call are converted exactly by Redis.

local function floor_div(a, b)
  local q = math.floor(a / b)
  if q * b > a then
    q = q - 1
  elseif (q + 1) * b <= a then
    q = q + 1
  end
  return q
end

local function ceil_div(a, b)
  local q = floor_div(a, b)
  if q * b < a then
    q = q + 1
  end
  return q
end

-- The time of a call in microseconds: `argument` (the caller's time), or
-- Redis's TIME when it is ''.
local function script_now(argument)
  if argument ~= '' then
    return tonumber(argument)
  end
  local time = redis.call('TIME')
  return tonumber(time[1]) * 1000000 + tonumber(time[2])
end

-- The shortest TTL to set, in microseconds (set by the entry script).
local minimum_ttl = 0

-- TTL in milliseconds for `ttl` microseconds: rounded up, at least
-- minimum_ttl; 0 when the state is no longer worth keeping.
local function ttl_ms(ttl)
  if ttl <= 0 then
    return 0
  end
  if ttl < minimum_ttl then
    ttl = minimum_ttl
  end
  return ceil_div(ttl, 1000)
end

-- Stores `value` at `key` for `ttl` microseconds, or drops it; returns what
-- the key now holds (false: nothing).
local function store(key, value, ttl)
  local ms = ttl_ms(ttl)
  if ms == 0 then
    redis.call('DEL', key)
    return false
  end
  redis.call('SET', key, value, 'PX', ms)
  return value
end

-- The two numbers of a state written under `version`; nil when the state is
-- absent, under another version, or not of this shape.
local function read_state(state, version)
  if not state then
    return nil
  end
  local stored, a, b = string.match(state, '^([^:]*):([^:]*):([^:]*)$')
  if stored ~= version then
    return nil
  end
  a = tonumber(a)
  b = tonumber(b)
  if a == nil or b == nil then
    return nil
  end
  return a, b
end
