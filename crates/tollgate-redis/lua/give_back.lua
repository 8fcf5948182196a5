-- Refunds: units given back to limits that took them (Envoy's
-- is_negative_hits), each limit on its own and never past what its rule
-- allows, by the engine's rule (crates/tollgate-core/src/limiter/give_back.rs,
-- `Limiter::give_back_units`): fixed_window_give_back,
-- counting_window_give_back, sliding_log_give_back
-- and token_bucket_give_back (in the algorithms' files) change the state,
-- then each limit is answered as a look (0 units) at `now` would be. A
-- refund is not a request: it moves no time, writes nothing for a key with
-- no state, and a key left with nothing counted is dropped. It has no
-- deadline: run late (Redis resuming from a stall), it still gives back
-- what it was asked to.
--
-- Rust twin: src/give_back.rs builds these arguments and reads the reply
-- (it is not src/refund.rs, which undoes the cluster's split steps).
--
-- With an overdraft (ARGV[3] a number, not NO_OVERDRAFT) the same call
-- charges instead (the engine's `Limiter::overdraw_units`, a request's usage
-- settled after its response): each limit takes its units whatever it has
-- left, at most `overdraft` units past its limit (the algorithms'
-- *_overdraw), a key without state getting one; a window counting refused
-- units is not charged so (FAILED).
--
-- ARGV: now in microseconds (REDIS_TIME for Redis's own TIME); the shortest
-- TTL to set in microseconds; the overdraft (NO_OVERDRAFT for a refund);
-- then per limit: the RULE_FIELDS fields of its
-- rule as acquire.lua takes them (algorithm, limit, window (us), burst,
-- state version), its units (at most 2^52), and the tier the caller expects
-- (NO_TIER for none to check).
-- KEYS, per limit in the same order: its state; its log list when its rule
-- is a sliding log; its tier key when a tier is expected.
--
-- Returns DECIDED followed, per limit, by remaining, retry_after and
-- reset_after (us) as a look at `now` sees them after the refund; or
-- TIER_CHANGED, index (1-based), actual tier when a plan's tier is not the
-- one expected (then nothing is given back).

local now = script_now(ARGV[1])
minimum_ttl = tonumber(ARGV[2])
local overdraft = nil
if ARGV[3] ~= NO_OVERDRAFT then
  overdraft = tonumber(ARGV[3])
end

local limits = {}
local at, key = 4, 1
while at <= #ARGV do
  local limit = {
    algorithm = ARGV[at],
    limit = tonumber(ARGV[at + 1]),
    window = rule_window(ARGV[at], ARGV[at + 2]),
    burst = tonumber(ARGV[at + 3]),
    version = ARGV[at + 4],
    units = tonumber(ARGV[at + 5]),
    tier = ARGV[at + 6],
    state = KEYS[key],
  }
  at = at + RULE_FIELDS + 2
  key = key + 1
  if limit.algorithm == SLIDING_LOG then
    limit.log = KEYS[key]
    key = key + 1
  end
  if limit.tier ~= NO_TIER then
    limit.tier_key = KEYS[key]
    key = key + 1
  end
  limits[#limits + 1] = limit
end

-- Every plan on the tier its caller expects, or nothing is given back.
for index, limit in ipairs(limits) do
  if limit.tier_key then
    local actual = redis.call('GET', limit.tier_key)
    if not actual or actual == '' then
      actual = DEFAULT_TIER
    end
    if actual ~= limit.tier then
      return {TIER_CHANGED, index, actual}
    end
  end
end

-- A window counting refused units is not charged past its limit: the whole
-- call is refused before anything is written.
if overdraft ~= nil then
  for _, limit in ipairs(limits) do
    if limit.algorithm == COUNTING_FIXED_WINDOW then
      return {FAILED, 'a window counting refused units is not charged after the response'}
    end
  end
end

local reply = {DECIDED}
for _, limit in ipairs(limits) do
  local algorithm, version = limit.algorithm, limit.version
  local state
  if algorithm ~= COUNTING_FIXED_WINDOW then
    state = read_string(limit.state)
  end
  local _, remaining, retry_after, reset_after
  -- The transition: a charge past the limit, or a refund.
  if overdraft ~= nil then
    if algorithm == FIXED_WINDOW then
      state = fixed_window_overdraw(limit.state, state, version, limit.limit, limit.window, now,
        limit.units, overdraft)
    elseif algorithm == CALENDAR_WINDOW then
      state = calendar_window_overdraw(limit.state, state, version, limit.limit, limit.window,
        now, limit.units, overdraft)
    elseif algorithm == SLIDING_LOG then
      state = sliding_log_overdraw(limit.state, limit.log, state, version, limit.limit,
        limit.window, now, limit.units, overdraft)
    elseif algorithm == TOKEN_BUCKET then
      state = token_bucket_overdraw(limit.state, state, version, limit.limit, limit.window,
        limit.burst, now, limit.units, overdraft)
    else
      return {FAILED, 'a window counting refused units is not charged after the response'}
    end
  elseif algorithm == FIXED_WINDOW then
    state = fixed_window_give_back(limit.state, state, version, limit.window, now, limit.units)
  elseif algorithm == COUNTING_FIXED_WINDOW then
    counting_window_give_back(limit.state, version, limit.window, now, limit.units)
  elseif algorithm == SLIDING_LOG then
    state = sliding_log_give_back(limit.state, limit.log, state, version, limit.window, now, limit.units)
  elseif algorithm == CALENDAR_WINDOW then
    state = calendar_window_give_back(limit.state, state, version, now, limit.units)
  elseif algorithm == TOKEN_BUCKET then
    state = token_bucket_give_back(
      limit.state, state, version, limit.limit, limit.window, limit.burst, now, limit.units)
  else
    error('unknown rule')
  end
  -- Then answered as a look (0 units) at now.
  if algorithm == FIXED_WINDOW then
    _, remaining, retry_after, reset_after = fixed_window(
      limit.state, state, version, limit.limit, limit.window, now, 0, false)
  elseif algorithm == COUNTING_FIXED_WINDOW then
    _, remaining, retry_after, reset_after = counting_window(
      limit.state, version, limit.limit, limit.window, now, 0, false)
  elseif algorithm == SLIDING_LOG then
    _, remaining, retry_after, reset_after = sliding_log(
      limit.state, limit.log, state, version, limit.limit, limit.window, now, 0, false)
  elseif algorithm == CALENDAR_WINDOW then
    _, remaining, retry_after, reset_after = calendar_window(
      limit.state, state, version, limit.limit, limit.window, now, 0, false)
  else
    _, remaining, retry_after, reset_after = token_bucket(
      limit.state, state, version, limit.limit, limit.window, limit.burst, now, 0, false)
  end
  reply[#reply + 1] = remaining
  reply[#reply + 1] = retry_after
  reply[#reply + 1] = reset_after
end
return reply
