-- Gives back `units` a request took from one limit and must not keep: a
-- request whose limits sit in different cluster slots takes from each in
-- turn, and gives back what it took when a later limit refuses (another
-- gateway took the last unit between the check and the charge) or a later
-- step fails (past its deadline, after a stall: the request is answered by
-- the failure policy and keeps nothing). A refund has no deadline: run late,
-- it still gives back what was taken.
-- KEYS: the state, the log list (sliding log). ARGV: now (us; REDIS_TIME
-- for Redis's TIME), then the RULE_FIELDS fields of the rule as acquire.lua
-- takes them: algorithm (FIXED_WINDOW, COUNTING_FIXED_WINDOW, SLIDING_LOG,
-- TOKEN_BUCKET; a COUNTING_FIXED_WINDOW counts what it was asked whatever
-- the request's other limits decide, so src/split.rs gives its units back
-- only when the request fails), limit,
-- window (us), burst, state version; then counted_at (us: where the acquire
-- script said the units count: a window's start, a run's time), units, the
-- shortest TTL (us). Returns the units given back (0 when the state has moved
-- on: a new window, a new version, the run gone; and for a counting window
-- whose count reached fixed_window.lua's count_cap, where what was counted
-- is no longer known: counting_window.lua's counting_window_refund).
--
-- It also cancels a reservation (acquire.lua's `reserve`: units counted at a
-- time ahead, whose request left while it waited), naming its counted_at;
-- TTLs set here run from the real now. The engine's twin is State::refund
-- (crates/tollgate-core/src/algorithm/mod.rs).
--
-- Rust twin: src/refund.rs (`refund`, called by src/split.rs and
-- src/reserve.rs) builds these
-- arguments and reads the reply; the transitions it undoes are those of
-- fixed_window.lua, counting_window.lua, sliding_log.lua and token_bucket.lua.
--
-- Exact when nothing else happened between the charge and the refund, and
-- for the fixed window and the sliding log whatever happened; a token bucket
-- that filled up completely in between (the units taken had refilled) keeps
-- the refill, so it may hold up to `units` more tokens than had the request
-- never been charged.

local now = script_now(ARGV[1])
local algorithm = ARGV[2]
local limit = tonumber(ARGV[3])
local window = rule_window(algorithm, ARGV[4])
local burst = tonumber(ARGV[5])
local version = ARGV[6]
local counted_at = tonumber(ARGV[7])
local units = tonumber(ARGV[8])
minimum_ttl = tonumber(ARGV[9])
if algorithm == COUNTING_FIXED_WINDOW then
  return counting_window_refund(KEYS[1], version, window, counted_at, units)
end
local state = read_string(KEYS[1])

if algorithm == CALENDAR_WINDOW then
  -- Units counted in the stored period, not yet ended (the engine's
  -- FixedWindow::refund): counted_at must lie in it. Its start is the
  -- boundary before its end among those sent (`window`: around now,
  -- reaching the period of counted_at, src/plans.rs fields_reaching).
  local window_end, count = read_state(state, version)
  if not window_end or now >= window_end or count < units then
    return 0
  end
  local start = nil
  for index = 2, #window do
    if window[index] == window_end then
      start = window[index - 1]
    end
  end
  if start == nil or counted_at < start or counted_at >= window_end then
    return 0
  end
  count = count - units
  local reset_after = 0
  if count > 0 then
    reset_after = window_end - now
  end
  store(KEYS[1], state_text(version, window_end, count), reset_after)
  return units
elseif algorithm == FIXED_WINDOW then
  local index, count, ahead = read_state(state, version)
  if not index or index ~= floor_div(counted_at, window) or index < floor_div(now, window)
    or count < units then
    return 0
  end
  count = count - units
  -- A count brought to 0 drops the key when its window has begun; a window
  -- still ahead (a reservation's) keeps its place at 0, as the engine's
  -- FixedWindow::refund does: reserving into it dropped the count of the
  -- window now is in.
  local reset_after = 0
  if count > 0 or index > floor_div(now, window) then
    reset_after = (index + 1) * window - now
  end
  store(KEYS[1], state_text(version, index, count, ahead), reset_after)
  return units
elseif algorithm == SLIDING_LOG then
  local counted, newest, reserved_until = read_state(state, version)
  if not counted or counted < units then
    return 0
  end
  -- The run at `counted_at`, searched from the newest back.
  local length = redis.call('LLEN', KEYS[2])
  for position = length - 1, 0, -1 do
    local run = redis.call('LINDEX', KEYS[2], position)
    local run_at, count = parse_run(run)
    if run_at == nil or run_at < counted_at then
      return 0
    end
    if run_at == counted_at then
      if count < units or run_at + window <= now then
        -- Too few, or stopped counting at now.
        return 0
      end
      if count == units then
        redis.call('LREM', KEYS[2], 1, run)
      else
        redis.call('LSET', KEYS[2], position, string.format('%d:%d', counted_at, count - units))
      end
      counted = counted - units
      if counted == 0 then
        redis.call('DEL', KEYS[1], KEYS[2])
        return units
      end
      if run_at == newest and count == units then
        newest = parse_run(redis.call('LINDEX', KEYS[2], -1)) or newest
      end
      local reset_after = newest + window - now
      if reset_after <= 0 then
        -- Every unit left has stopped counting.
        redis.call('DEL', KEYS[1], KEYS[2])
        return units
      end
      -- No turn is reserved past the newest run left.
      if reserved_until > newest then
        reserved_until = newest
      end
      store(KEYS[1], state_text(version, counted, newest, reserved_until), reset_after)
      local ms = ttl_ms(reset_after)
      if ms > 0 then
        redis.call('PEXPIRE', KEYS[2], decimal(ms))
      end
      return units
    end
  end
  return 0
end

-- The token bucket: its tokens go back at now (token_bucket_give_back, the
-- engine's TokenBucket::refund): the time it is full again moves back by
-- their worth, no earlier than now; nothing for a bucket full at now.
local t, r = read_state(state, version)
if not t or t < now or (t == now and r == 0) then
  return 0
end
-- Only the last turns of the queue go back: a bucket full again later than
-- burst after counted_at has turns booked behind this one.
local capacity = burst * window
if t >= counted_at and (t - counted_at > ceil_div(capacity, limit) + 1
    or (t - counted_at) * limit + r > capacity) then
  return 0
end
token_bucket_give_back(KEYS[1], state, version, limit, window, burst, now, units)
return units
