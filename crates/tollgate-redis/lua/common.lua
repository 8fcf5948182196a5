-- Shared by every tollgate script. Numbers are Lua doubles: every quantity here
-- stays below 2^53 (the store refuses policies that could go beyond), so every
-- sum, difference and product is exact, and floor_div corrects the one step
-- where a double division could round. A state is one string value,
-- "version:a:b", read with the key's tier in one MGET and written with its TTL
-- in one SET (a counting window's is a hash, one HINCRBY a hit, its tier
-- read with GET: see counting_window.lua): each Redis call inside a script
-- costs about as much as all the arithmetic.
--
-- Rust twins: src/protocol.rs holds the constants below under the same names
-- (its tests compare the two); src/script.rs puts every script together, this
-- file first.

-- The codes of the argument and reply protocol (see src/protocol.rs).
local REDIS_TIME = '' -- protocol::REDIS_TIME: `now` argument for Redis's TIME
local FIXED_WINDOW = 'f' -- protocol::FIXED_WINDOW: algorithm code
local COUNTING_FIXED_WINDOW = 'c' -- protocol::COUNTING_FIXED_WINDOW: algorithm code (counts refused units)
local SLIDING_LOG = 's' -- protocol::SLIDING_LOG: algorithm code (sends its log key)
local TOKEN_BUCKET = 't' -- protocol::TOKEN_BUCKET: algorithm code
local CALENDAR_WINDOW = 'k' -- protocol::CALENDAR_WINDOW: algorithm code (its window: four boundaries)
local RULE_FIELDS = 5 -- protocol::RULE_FIELDS: algorithm, limit, window, burst, version
local WRITE = '1' -- protocol::WRITE: a request's write flag, decide and store
local READ_ONLY = '0' -- protocol::READ_ONLY: a request's write flag, only read
local NO_TIER = '' -- protocol::NO_TIER: expected tier of a limit without one
local DEFAULT_TIER = 'default' -- protocol::DEFAULT_TIER: a plan without a tier
local DECIDED = 0 -- protocol::DECIDED: reply status, then the outcomes
local TIER_CHANGED = 1 -- protocol::TIER_CHANGED: reply status, then index, tier
local FAILED = 2 -- protocol::FAILED: reply status, then the message
local EXPIRED = 3 -- protocol::EXPIRED: reply status, the deadline had passed
local NO_DEADLINE = '' -- protocol::NO_DEADLINE: a request that only reads
local OUTCOME_FIELDS = 5 -- protocol::OUTCOME_FIELDS: numbers per limit decided
local RESERVED = 4 -- protocol::RESERVED: reply status, then the wait and the outcomes
local NO_WAIT = '' -- protocol::NO_WAIT: a request that does not wait (no reservation)
local NO_OVERDRAFT = '' -- protocol::NO_OVERDRAFT: give_back.lua refunds (no overdraw)
local ADMIN_TIER = 'tier' -- protocol::ADMIN_TIER: admin command, set the tier
local ADMIN_RESET = 'reset' -- protocol::ADMIN_RESET: admin command, drop the state
local ADMIN_DONE = 1 -- protocol::ADMIN_DONE: admin reply, done
local ADMIN_NOTHING = 0 -- protocol::ADMIN_NOTHING: admin reply, no state to reset
local CONFIG_POLICY = 'policy' -- protocol::CONFIG_POLICY: field of PREFIX:config
local CONFIG_GENERATION = 'generation' -- protocol::CONFIG_GENERATION: field of PREFIX:config

-- Numbers become text exactly through string.format('%d') (Lua's own
-- conversion, used by `..` and tostring, keeps only 14 significant digits);
-- numbers passed to redis.call are converted exactly by Redis.

-- `n` in decimal, exact (string.format's %d), remembered for the rest of
-- the call: a call's decisions repeat the same few numbers (0, the units,
-- a window's start and end), and each string.format costs more than all of
-- a decision's arithmetic.
local decimals = {}
local function decimal(n)
  local text = decimals[n]
  if not text then
    text = string.format('%d', n)
    decimals[n] = text
  end
  return text
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

-- Redis's own clock (TIME) in microseconds.
local function redis_time()
  local time = redis.call('TIME')
  return tonumber(time[1]) * 1000000 + tonumber(time[2])
end

-- The time of a call in microseconds: `argument` (the caller's time), or
-- Redis's (`time` when the caller read it already) when it is REDIS_TIME.
local function script_now(argument, time)
  if argument ~= REDIS_TIME then
    return tonumber(argument)
  end
  return time or redis_time()
end

-- The shortest TTL to set, in microseconds (set by the entry script).
local minimum_ttl = 0

-- How much later than the call's `now` the transition being run happens, in
-- microseconds: a reservation's charge at its turn (acquire.lua's
-- `reserve`), whose states' TTLs, counted from that time, must run from now.
-- 0 otherwise.
local ttl_offset = 0

-- TTL in milliseconds for `ttl` microseconds (counted from the time the
-- transition runs at, `ttl_offset` after now): rounded up, at least
-- minimum_ttl; 0 when the state is no longer worth keeping.
local function ttl_ms(ttl)
  if ttl <= 0 then
    return 0
  end
  ttl = ttl + ttl_offset
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
  -- The TTL as text: a number argument Redis would format itself with
  -- %.17g, about 1,700 instructions against a lookup in `decimals`.
  redis.call('SET', key, value, 'PX', decimal(ms))
  return value
end

-- A rule's window argument: microseconds, or for a calendar window its
-- boundaries (us, ascending, separated by spaces: at least four;
-- fixed_window.lua's calendar_window) as a table.
local function rule_window(algorithm, text)
  if algorithm ~= CALENDAR_WINDOW then
    return tonumber(text)
  end
  local bounds = {}
  for bound in string.gmatch(text, '%d+') do
    bounds[#bounds + 1] = tonumber(bound)
  end
  if #bounds < 4 then
    error('a calendar window needs at least four boundaries')
  end
  return bounds
end

-- The string state at `key`, or false. MGET rather than GET: a key holding
-- a counting window's hash (counting_window.lua: a policy since changed)
-- reads as none instead of failing with WRONGTYPE.
local function read_string(key)
  return redis.call('MGET', key)[1]
end

-- The numbers of a state written under `version`, "version:a:b" or
-- "version:a:b:c": a, b and c (0 when absent: a fixed window's or a sliding
-- log's mark of a turn reserved ahead, see fixed_window.lua and
-- sliding_log.lua); nil when the state is absent, under another version, or
-- not of this shape.
local function read_state(state, version)
  if not state then
    return nil
  end
  local stored, a, b, c = string.match(state, '^([^:]*):([^:]*):([^:]*):?([^:]*)$')
  if stored ~= version then
    return nil
  end
  a = tonumber(a)
  b = tonumber(b)
  if a == nil or b == nil then
    return nil
  end
  return a, b, tonumber(c) or 0
end

-- The text of a state: "version:a:b", and ":c" when `c` is not 0.
local function state_text(version, a, b, c)
  if c ~= nil and c ~= 0 then
    return string.format('%s:%d:%d:%d', version, a, b, c)
  end
  return string.format('%s:%d:%d', version, a, b)
end
