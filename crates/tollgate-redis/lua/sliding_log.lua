-- The sliding log: a unit allowed at t counts while now - W < t. State
-- "version:counted:newest" and a list of runs "time:count", oldest first, so
-- a batch is one run and the list holds at most min(limit, W) runs. Expired
-- runs are popped from the front. Returns what the fixed window returns; the
-- units count at the time of their run.
--
-- Rust twins: crates/tollgate-core/src/algorithm/sliding_log.rs, the
-- engine's transition this mirrors; src/call.rs sends its rule's fields
-- (algorithm SLIDING_LOG, and the log key) and reads what it returns;
-- src/refund.rs gives its units back through refund.lua (which reads runs with
-- parse_run).

-- A run's time and count; nil for a missing or malformed run.
local function parse_run(run)
  if not run then
    return nil
  end
  local at, count = string.match(run, '^([^:]*):([^:]*)$')
  return tonumber(at), tonumber(count)
end

-- The earliest time (us, never before `now` nor before the newest run) at
-- which `units` fit, changing nothing (the engine's SlidingLog::earliest):
-- when enough of the oldest runs stop counting. nil when `units` is more
-- than `limit`, which never fits.
local function sliding_log_earliest(log, state, version, limit, window, now, units)
  if units > limit then
    return nil
  end
  local counted, newest = read_state(state, version)
  if not counted then
    return now
  end
  local at = now
  if newest > at then
    at = newest
  end
  local index = 0
  while counted + units > limit do
    local run_at, count = parse_run(redis.call('LINDEX', log, index))
    if run_at == nil or count == nil then
      -- Damaged: a decision starts the key afresh (see sliding_log).
      return now
    end
    counted = counted - count
    if run_at + window > at then
      at = run_at + window
    end
    index = index + 1
  end
  return at
end

-- A state "version:counted:newest:reserved_until" (the engine's
-- SlidingLog::reserved_until: the latest time a reservation charged a run
-- at, ahead of its now) allows nothing to a decision before that time:
-- requests queue behind it (SlidingLog::queued_ahead); nothing is written,
-- retry_after is the wait until one unit fits, reset_after until the newest
-- run stops counting.
local function sliding_log(key, log, state, version, limit, window, now, units, write)
  local counted, newest, reserved_until = read_state(state, version)
  if not counted then
    counted = 0
    newest = nil
    reserved_until = 0
    if write then
      redis.call('DEL', log)
    end
  elseif now < reserved_until then
    local retry_after = 0
    if units > 0 then
      retry_after = sliding_log_earliest(log, state, version, limit, window, now, 1) - now
    end
    return 0, 0, retry_after, newest + window - now, state, now
  end
  -- A time older than the newest run is treated as the newest run's time;
  -- the TTLs set run from the real now.
  local real_now = now
  if newest ~= nil and newest > now then
    now = newest
  end
  -- Expire from the front (only reading, when not writing).
  local oldest = nil
  local index = 0
  while counted > 0 do
    local at, count = parse_run(redis.call('LINDEX', log, index))
    if at == nil or count == nil then
      -- The runs and the count disagree (the list was evicted or damaged):
      -- start the key afresh rather than fail every request in the call.
      counted = 0
      oldest = nil
      newest = nil
      reserved_until = 0
      if write then
        redis.call('DEL', log)
      end
      break
    end
    if at + window > now then
      oldest = at
      break
    end
    counted = counted - count
    if write then
      redis.call('LPOP', log)
    else
      index = index + 1
    end
  end
  if counted == 0 then
    -- Nothing held: no turn reserved either, as the engine's expire leaves it.
    reserved_until = 0
  end
  local room = limit - counted
  if room < 0 then
    -- In debt (sliding_log_overdraw charged past the limit).
    room = 0
  end
  local allowed = math.min(units, room)
  if allowed > 0 then
    if write then
      local at, count = nil, nil
      if newest == now and counted > 0 then
        at, count = parse_run(redis.call('LINDEX', log, -1))
      end
      if at ~= nil and count ~= nil then
        redis.call('LSET', log, -1, string.format('%d:%d', at, count + allowed))
      else
        redis.call('RPUSH', log, string.format('%d:%d', now, allowed))
      end
    end
    if oldest == nil then
      oldest = now
    end
    newest = now
    counted = counted + allowed
  end
  local retry_after = 0
  if allowed < units and counted > limit then
    -- In debt: one unit fits once at most limit - 1 count, after enough of
    -- the oldest runs (from the first still counting) have gone (the
    -- engine's SlidingLog::earliest for one unit).
    local leaving = counted - limit + 1
    local position = 0
    if not write then
      position = index
    end
    while leaving > 0 do
      local at, count = parse_run(redis.call('LINDEX', log, position))
      if at == nil or count == nil then
        break
      end
      leaving = leaving - count
      retry_after = at + window - now
      position = position + 1
    end
  elseif allowed < units then
    retry_after = oldest + window - now
  end
  local reset_after = 0
  if counted > 0 then
    reset_after = newest + window - now
  end
  if write then
    local ttl = reset_after + now - real_now
    if reset_after == 0 then
      ttl = 0
    end
    state = store(key, state_text(version, counted, newest or 0, reserved_until), ttl)
    local ms = ttl_ms(ttl)
    if ms == 0 then
      redis.call('DEL', log)
    else
      redis.call('PEXPIRE', log, decimal(ms))
    end
  end
  return allowed, math.max(limit - counted, 0), retry_after, reset_after, state, now
end

-- Charges `units` at `now` whatever the log has left, the units counted at
-- most `limit + overdraft` (the engine's SlidingLog::overdraw): the runs
-- expired as a decision expires them, then one run at now (the newest
-- run's time when now is older). Returns the state the key holds.
local function sliding_log_overdraw(key, log, state, version, limit, window, now, units, overdraft)
  if units == 0 then
    return state
  end
  local real_now = now
  local _
  _, _, _, _, state, now = sliding_log(key, log, state, version, limit, window, now, 0, true)
  local counted, newest, reserved_until = read_state(state, version)
  if not counted then
    counted, newest, reserved_until = 0, nil, 0
  end
  if newest ~= nil and newest > now then
    now = newest
  end
  local added = math.min(units, limit + overdraft - counted)
  if added <= 0 then
    return state
  end
  local at, count = nil, nil
  if newest == now and counted > 0 then
    at, count = parse_run(redis.call('LINDEX', log, -1))
  end
  if at ~= nil and count ~= nil then
    redis.call('LSET', log, -1, string.format('%d:%d', at, count + added))
  else
    redis.call('RPUSH', log, string.format('%d:%d', now, added))
  end
  local ttl = now + window - real_now
  state = store(key, state_text(version, counted + added, now, reserved_until), ttl)
  local ms = ttl_ms(ttl)
  if ms > 0 then
    redis.call('PEXPIRE', log, decimal(ms))
  end
  return state
end

-- Charges `units` at `at` (us, where sliding_log_earliest found they fit): a
-- reservation (the engine's SlidingLog::reserve). Runs are dropped only as
-- of `now` (or the newest run), not `at`, so that giving the reservation
-- back (refund.lua) leaves the units that still count at `now`; the count
-- may exceed `limit` by units that stop counting before `at`, which every
-- decision drops first (it never looks before the newest run). Returns what
-- sliding_log returns, as a decision at `at` sees it; TTLs run from now
-- (the caller sets ttl_offset to at - now).
local function sliding_log_reserve(key, log, state, version, limit, window, now, at, units)
  local counted, newest, reserved_until = read_state(state, version)
  if not counted then
    counted = 0
    newest = nil
    reserved_until = 0
    redis.call('DEL', log)
  end
  local from = now
  if newest ~= nil and newest > from then
    from = newest
  end
  while counted > 0 do
    local run_at, count = parse_run(redis.call('LINDEX', log, 0))
    if run_at == nil or count == nil then
      counted = 0
      newest = nil
      redis.call('DEL', log)
      break
    end
    if run_at + window > from then
      break
    end
    counted = counted - count
    redis.call('LPOP', log)
  end
  if at < from then
    at = from
  end
  if counted == 0 then
    reserved_until = 0
  end
  if at > now and at > reserved_until then
    reserved_until = at
  end
  local merged = false
  if newest == at and counted > 0 then
    local run_at, count = parse_run(redis.call('LINDEX', log, -1))
    if run_at == at and count ~= nil then
      redis.call('LSET', log, -1, string.format('%d:%d', at, count + units))
      merged = true
    end
  end
  if not merged then
    redis.call('RPUSH', log, string.format('%d:%d', at, units))
  end
  counted = counted + units
  -- What a decision at `at` sees: the runs that stop counting by then left out.
  local counting = counted
  local index = 0
  while true do
    local run_at, count = parse_run(redis.call('LINDEX', log, index))
    if run_at == nil or count == nil or run_at + window > at then
      break
    end
    counting = counting - count
    index = index + 1
  end
  state = store(key, state_text(version, counted, at, reserved_until), window)
  redis.call('PEXPIRE', log, decimal(ttl_ms(window)))
  return units, limit - counting, 0, window, state, at
end

-- A refund (lua/give_back.lua; the engine's SlidingLog::give_back): up to
-- `units` of the newest units still counting at `now` go, runs emptied from
-- the newest back (expired runs stay for the next decision to pop); when no
-- unit counts at `now` afterwards, the key and its log are dropped (fresh,
-- as if never charged). Returns the state the key holds afterwards (false:
-- none).
local function sliding_log_give_back(key, log, state, version, window, now, units)
  local counted, _, reserved_until = read_state(state, version)
  if not counted or now < reserved_until then
    -- Nothing, or turns reserved ahead of now, the newest units, which
    -- waiting requests hold (the engine's SlidingLog::give_back).
    return state
  end
  while units > 0 and counted > 0 do
    local at, count = parse_run(redis.call('LINDEX', log, -1))
    if at == nil or count == nil or at + window <= now then
      break
    end
    local back = math.min(count, units)
    units = units - back
    counted = counted - back
    if back == count then
      redis.call('RPOP', log)
    else
      redis.call('LSET', log, -1, string.format('%d:%d', at, count - back))
    end
  end
  local newest = nil
  if counted > 0 then
    newest = parse_run(redis.call('LINDEX', log, -1))
  end
  if newest == nil or newest + window <= now then
    redis.call('DEL', key, log)
    return false
  end
  local reset_after = newest + window - now
  state = store(key, state_text(version, counted, newest, reserved_until), reset_after)
  redis.call('PEXPIRE', log, decimal(ttl_ms(reset_after)))
  return state
end
