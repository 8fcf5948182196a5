-- Requests held to their limits, one after another, each decided atomically
-- by core's rule of Limiter::acquire_units: a limit whose rule counts refused
-- units (COUNTING_FIXED_WINDOW) is charged its units whatever the others
-- decide; the others are all or nothing among themselves (each checked with
-- its units, each charged only if every one allows all of its units); 0
-- units only look. Concurrent requests share one call. A request run past
-- its deadline (Redis resuming from a stall, its caller long answered by the
-- failure policy) does nothing.
--
-- Rust twin: src/call.rs builds these arguments (`decide`, `invoke`, from
-- its `Request`s of `ScriptLimit`s; the deadlines from
-- src/context/redis_clock.rs) and reads the reply (`read_replies`); the
-- codes are the constants of common.lua and src/protocol.rs; the rule is
-- crates/tollgate-core/src/limiter/mod.rs's `acquire_together`.
--
-- ARGV: now in microseconds (REDIS_TIME for Redis's own TIME); the shortest
-- TTL to set in microseconds (0: exactly the state's useful life); the number
-- of rules, then RULE_FIELDS fields per rule: algorithm (FIXED_WINDOW,
-- COUNTING_FIXED_WINDOW, SLIDING_LOG, TOKEN_BUCKET, CALENDAR_WINDOW), limit,
-- window (us; a calendar window's four boundaries, see fixed_window.lua),
-- burst, state version; then per request: its number of limits, a write flag
-- (WRITE, or READ_ONLY to only read), its deadline (microseconds on Redis's
-- own clock, TIME: past it the request does nothing; NO_DEADLINE only for a
-- request that does not write), how long it may wait rather than be refused
-- (microseconds, see `reserve`; NO_WAIT for a request that does not wait),
-- and per limit: its rule (1-based), its
-- units (at most 2^52) and the tier the caller expects (NO_TIER for none to
-- check).
-- KEYS, per limit in the same order: its state; its log list when its rule is
-- a sliding log; its tier key when a tier is expected.
--
-- Returns one flat array: Redis's TIME when the call ran (us; the caller
-- learns Redis's clock from it), then per request: DECIDED followed by one
-- string of OUTCOME_FIELDS numbers per limit, every number in decimal and
-- separated from the next by one space: the time its units count at (us;
-- what a refund names), allowed, remaining, retry_after, reset_after; or
-- RESERVED, the wait (us) and the outcomes as DECIDED has them, for a
-- request that may wait; or
-- TIER_CHANGED, index (1-based), actual tier when a plan's tier is not the
-- one expected (nothing of that request is decided); or EXPIRED when Redis
-- ran the call past the request's deadline (its caller has given up, after a
-- stall: nothing read, nothing written); or FAILED, message.
-- A request whose count of limits is not a count or runs past the last
-- argument fails (FAILED), and so does every request after it; a call whose
-- count of rules or of requests does not fit its arguments decides nothing
-- and answers a Redis error, "ERR malformed call: ...".

local time = redis_time()
local now = script_now(ARGV[1], time)
minimum_ttl = tonumber(ARGV[2])

-- The last argument: a count whose fields would run past it is a caller's
-- bug, failed rather than read (a count as large as a deadline, read as it
-- stands, would loop for hours with Redis blocked).
local last = #ARGV

-- Each count is checked to be a whole number, not negative (nil, NaN and
-- fractions are not), written out where it is read: a function would be
-- made anew on every call, and calls of one request are common.
local rule_count = tonumber(ARGV[3])
if not (rule_count and rule_count >= 0 and rule_count % 1 == 0)
    or 3 + RULE_FIELDS * rule_count > last then
  return redis.error_reply('ERR malformed call: its count of rules does not fit its arguments')
end
local rules = {}
local at = 4
for index = 1, rule_count do
  rules[index] = {
    ARGV[at], tonumber(ARGV[at + 1]), rule_window(ARGV[at], ARGV[at + 2]), tonumber(ARGV[at + 3]),
    ARGV[at + 4],
  }
  at = at + RULE_FIELDS
end

-- The number `text` (an argument) stands for, remembered for the rest of
-- the call: its requests repeat the same few (limits per request, rule
-- index, units), and each tonumber of a string is a strtod, about 450
-- instructions against a lookup. nil when `text` is not a number.
local numbers = {}
local function number(text)
  local value = numbers[text]
  if value == nil then
    value = tonumber(text)
    if value ~= nil then
      numbers[text] = value
    end
  end
  return value
end

-- Per limit of the request being decided: rule, units, state key, log key,
-- expected tier (NO_TIER for none), tier key, state.
local limit_rules, limit_units, state_keys, log_keys, expected_tiers, tier_keys, states =
  {}, {}, {}, {}, {}, {}, {}

-- Reads the fields (from ARGV[at]) and keys (from KEYS[key]) of a request's
-- `limits` limits into the tables above; returns where the next request's
-- fields and keys start.
local function read_limits(limits, at, key)
  for index = 1, limits do
    local rule = rules[number(ARGV[at])]
    limit_rules[index] = rule
    limit_units[index] = number(ARGV[at + 1])
    expected_tiers[index] = ARGV[at + 2]
    at = at + 3
    state_keys[index] = KEYS[key]
    key = key + 1
    if rule and rule[1] == SLIDING_LOG then
      log_keys[index] = KEYS[key]
      key = key + 1
    end
    if expected_tiers[index] ~= NO_TIER then
      tier_keys[index] = KEYS[key]
      key = key + 1
    end
  end
  return at, key
end

-- One limit's outcome as the reply carries it: its OUTCOME_FIELDS numbers,
-- exact (common.lua's decimal), separated by single spaces. One string per
-- request rather than one reply element per number: the caller's RESP
-- parser spends about a thousand instructions on each element, and Redis
-- converts each too.
local function outcome_text(counted_at, allowed, remaining, retry_after, reset_after)
  return decimal(counted_at) .. ' ' .. decimal(allowed) .. ' ' .. decimal(remaining) .. ' '
    .. decimal(retry_after) .. ' ' .. decimal(reset_after)
end

-- Decides `units` of limit `index` at `at` (us; now when not given);
-- `reserved_from`, the real now of a reservation charged at its turn `at`
-- (charge_at; nil for a decision).
local function decide(index, units, write, at, reserved_from)
  -- A look (0 units) writes nothing, as the core's peek changes nothing:
  -- writing the state back tidied (expired runs dropped, a new window begun)
  -- would let a later call on a lagging clock count without what it dropped.
  write = write and units > 0
  at = at or now
  local rule = limit_rules[index]
  local algorithm, limit, window, burst, version = rule[1], rule[2], rule[3], rule[4], rule[5]
  local key, state = state_keys[index], states[index]
  if algorithm == FIXED_WINDOW then
    return fixed_window(key, state, version, limit, window, at, units, write, reserved_from)
  elseif algorithm == COUNTING_FIXED_WINDOW then
    return counting_window(key, version, limit, window, at, units, write)
  elseif algorithm == SLIDING_LOG then
    return sliding_log(key, log_keys[index], state, version, limit, window, at, units, write)
  elseif algorithm == CALENDAR_WINDOW then
    return calendar_window(key, state, version, limit, window, at, units, write)
  end
  -- TOKEN_BUCKET (the code left).
  return token_bucket(key, state, version, limit, window, burst, at, units, write)
end

-- The earliest time (us, never before now) at which limit `index` allows
-- `units`, changing nothing (core's State::earliest); nil when they never
-- fit. A window counting refused units is charged whatever it has: now.
local function earliest(index, units)
  local rule = limit_rules[index]
  local algorithm, limit, window, burst, version = rule[1], rule[2], rule[3], rule[4], rule[5]
  local state = states[index]
  if algorithm == FIXED_WINDOW then
    return fixed_window_earliest(state, version, limit, window, now, units)
  elseif algorithm == COUNTING_FIXED_WINDOW then
    return now
  elseif algorithm == SLIDING_LOG then
    return sliding_log_earliest(log_keys[index], state, version, limit, window, now, units)
  elseif algorithm == CALENDAR_WINDOW then
    return calendar_window_earliest(state, version, limit, window, now, units)
  end
  return token_bucket_earliest(state, version, limit, window, burst, now, units)
end

-- Charges `units` of limit `index` at `at` (us, no earlier than now), where
-- `earliest` found they fit (core's State::reserve): a decision at `at`,
-- except that a sliding log keeps the runs that count now; TTLs run from now.
local function charge_at(index, units, at)
  ttl_offset = at - now
  local rule = limit_rules[index]
  local results
  if rule[1] == SLIDING_LOG then
    results = {sliding_log_reserve(state_keys[index], log_keys[index], states[index], rule[5],
      rule[2], rule[3], now, at, units)}
  else
    results = {decide(index, units, true, at, now)}
  end
  ttl_offset = 0
  return results[1], results[2], results[3], results[4]
end

-- A request of `limits` limits that waits up to `max_wait` (us) rather than
-- be refused (core's Limiter::reserve_units, nginx's limit_req burst with
-- delay): it is served at `at`, the latest of the times each limit allows
-- its units. When `at - now <= max_wait` every limit is charged as a
-- decision at `at` charges it (a counting window at now, whatever the
-- others decide); otherwise nothing is taken and each limit is refused with
-- retry_after `at - now - max_wait` (at least 1), or, when some units never
-- fit, the wait a decision would tell. Appends RESERVED, the wait (us; 0
-- when refused) and the outcomes, each counted at `at` when served, at now
-- when refused (what a cancellation, refund.lua, names).
local function reserve(replies, limits, max_wait)
  local at = now
  local fits = true
  for index = 1, limits do
    local units = limit_units[index]
    if units > 0 then
      local turn = earliest(index, units)
      if turn == nil then
        fits = false
      elseif turn > at then
        at = turn
      end
    end
  end
  local admitted = fits and at - now <= max_wait
  local counted_at = now
  if admitted then
    counted_at = at
  end
  local outcome = {}
  for index = 1, limits do
    local units = limit_units[index]
    local allowed, remaining, retry_after, reset_after
    if units == 0 then
      allowed, remaining, retry_after, reset_after = decide(index, 0, false)
    elseif limit_rules[index][1] == COUNTING_FIXED_WINDOW then
      -- Counting hits as they arrive: at now, whatever the others decide.
      allowed, remaining, retry_after, reset_after = charge_at(index, units, now)
    elseif admitted then
      allowed, remaining, retry_after, reset_after = charge_at(index, units, counted_at)
    else
      allowed = 0
      local _
      _, remaining, _, reset_after = decide(index, 0, false)
      if fits then
        retry_after = at - now - max_wait
      else
        _, _, retry_after = decide(index, units, false)
      end
      if retry_after < 1 then
        retry_after = 1
      end
    end
    outcome[index] = outcome_text(counted_at, allowed, remaining, retry_after, reset_after)
  end
  local n = #replies
  replies[n + 1] = RESERVED
  local wait = 0
  if admitted then
    wait = at - now
  end
  replies[n + 2] = wait
  replies[n + 3] = table.concat(outcome, ' ')
end

-- One request of `limits` limits, read by read_limits; appends its reply to
-- `replies`. `max_wait` (us): how long it may wait rather than be refused
-- (`reserve`); nil for a request that does not wait.
local function handle(replies, limits, write, max_wait)
  for index = 1, limits do
    local expected = expected_tiers[index]
    if limit_rules[index] == nil then
      error('unknown rule')
    end
    -- A counting window reads its own state as it counts (counting_window.lua).
    local counting = limit_rules[index][1] == COUNTING_FIXED_WINDOW
    local state, actual = false, nil
    if expected == NO_TIER then
      if not counting then
        state = read_string(state_keys[index])
      end
    elseif counting then
      actual = redis.call('GET', tier_keys[index])
    else
      local found = redis.call('MGET', state_keys[index], tier_keys[index])
      state, actual = found[1], found[2]
    end
    if expected ~= NO_TIER then
      if not actual or actual == '' then
        -- No tier (an empty one, written by something else, counts as none:
        -- NO_TIER is how a limit without a tier is sent).
        actual = DEFAULT_TIER
      end
      if actual ~= expected then
        replies[#replies + 1] = TIER_CHANGED
        replies[#replies + 1] = index
        replies[#replies + 1] = actual
        return
      end
    end
    states[index] = state
  end
  if max_wait ~= nil then
    reserve(replies, limits, max_wait)
    return
  end
  local n = #replies
  local rule = limit_rules[1]
  if limits == 1 and (limit_units[1] <= 1 or rule[1] == COUNTING_FIXED_WINDOW) then
    -- One limit whose own decision is the whole answer.
    local allowed, remaining, retry_after, reset_after, _, counted_at =
      decide(1, limit_units[1], write)
    replies[n + 1] = DECIDED
    replies[n + 2] = outcome_text(counted_at, allowed, remaining, retry_after, reset_after)
    return
  end
  -- Check every all-or-nothing limit with nothing taken (a look: nothing
  -- written); then charge each only if all allow their units. Counting
  -- limits and looks (0 units) are decided on their own.
  local checks = {}
  local everyone = true
  for index = 1, limits do
    local units = limit_units[index]
    if units > 0 and limit_rules[index][1] ~= COUNTING_FIXED_WINDOW then
      local _, remaining, _, reset_after, tidied = decide(index, 0, write)
      states[index] = tidied
      checks[index] = {remaining, reset_after}
      if remaining < units then
        everyone = false
      end
    end
  end
  local outcome = {}
  for index = 1, limits do
    local units = limit_units[index]
    local check = checks[index]
    local allowed, remaining, retry_after, reset_after, counted_at
    if check == nil or everyone or check[1] < 1 then
      -- Charged (a counting limit, or everyone allows), looked at (0
      -- units), or refused with nothing left (which takes nothing).
      local _
      allowed, remaining, retry_after, reset_after, _, counted_at = decide(index, units, write)
    else
      -- Nothing taken: refused by another limit, or here with some room but
      -- not enough (then with the wait a batch of its units would be told).
      allowed, remaining, retry_after, reset_after, counted_at = 0, check[1], 0, check[2], now
      if remaining < units then
        local _
        _, _, retry_after = decide(index, units, false)
      end
    end
    outcome[index] = outcome_text(counted_at, allowed, remaining, retry_after, reset_after)
  end
  replies[n + 1] = DECIDED
  replies[n + 2] = table.concat(outcome, ' ')
end

-- Why a request is not to be decided: EXPIRED past its deadline (its caller
-- has answered without it, by the failure policy, and must find nothing
-- charged), FAILED and a message for a write without a deadline; nil when it
-- is to be decided.
local function not_decided(write, deadline)
  if deadline == NO_DEADLINE then
    if write then
      return FAILED, 'a request that writes needs a deadline'
    end
    return nil
  end
  local by = tonumber(deadline)
  if not by then
    return FAILED, 'invalid deadline'
  end
  if time > by then
    return EXPIRED
  end
  return nil
end

local replies = {time}
local key = 1
local requests = tonumber(ARGV[at])
at = at + 1
-- Each request has at least four fields.
if not (requests and requests >= 0 and requests % 1 == 0) or at + 4 * requests - 1 > last then
  return redis.error_reply('ERR malformed call: its count of requests does not fit its arguments')
end
for request = 1, requests do
  local limits = number(ARGV[at])
  if not (limits and limits >= 0 and limits % 1 == 0) or at + 3 + 3 * limits > last then
    -- This request and every one after it (whose fields cannot be found)
    -- fail, with nothing of theirs read or written; those before stand.
    for _ = request, requests do
      replies[#replies + 1] = FAILED
      replies[#replies + 1] = 'malformed request: its limits run past the arguments'
    end
    return replies
  end
  local write = ARGV[at + 1] == WRITE
  local deadline = ARGV[at + 2]
  local max_wait = nil
  if ARGV[at + 3] ~= NO_WAIT then
    max_wait = tonumber(ARGV[at + 3])
  end
  at, key = read_limits(limits, at + 4, key)
  local before = #replies
  local status, message = not_decided(write, deadline)
  if status == EXPIRED then
    replies[before + 1] = EXPIRED
  elseif status == FAILED then
    replies[before + 1] = FAILED
    replies[before + 2] = message
  else
    -- A failing request fails alone, not the call it shares.
    local ok, failure = pcall(handle, replies, limits, write, max_wait)
    if not ok then
      for index = #replies, before + 1, -1 do
        replies[index] = nil
      end
      if type(failure) == 'table' and failure.err then
        failure = failure.err
      end
      replies[before + 1] = FAILED
      replies[before + 2] = tostring(failure)
    end
  end
end
return replies
