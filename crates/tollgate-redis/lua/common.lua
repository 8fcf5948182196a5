-- Shared by every tollgate script. Numbers are Lua doubles: every quantity here
-- stays below 2^53 (the store refuses policies that could go beyond), so every
-- sum, difference and product is exact, and floor_div corrects the one step
-- where a double division could round.

-- An integer as exact decimal text: Lua's own conversion keeps only 14
-- significant digits, so every number written to Redis goes through this.
local function int(n)
  return string.format('%.0f', n)
end

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

-- The shortest TTL to set, in microseconds (set by the entry script).
local minimum_ttl = 0

-- Keeps `keys` for `ttl` microseconds (rounded up to milliseconds, and at
-- least minimum_ttl), or drops them when the state is no longer worth keeping
-- (ttl <= 0).
local function keep_for(ttl, ...)
  local keys = {...}
  if ttl > 0 and ttl < minimum_ttl then
    ttl = minimum_ttl
  end
  if ttl <= 0 then
    redis.call('DEL', unpack(keys))
    return
  end
  local ms = ceil_div(ttl, 1000)
  for _, key in ipairs(keys) do
    redis.call('PEXPIRE', key, int(ms))
  end
end
