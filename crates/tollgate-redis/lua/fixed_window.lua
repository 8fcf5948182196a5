-- The fixed window: `limit` units per window [k*W, (k+1)*W) aligned to the
-- epoch. State "version:k:count". Returns allowed, remaining, retry_after,
-- reset_after (microseconds), the state the key holds afterwards and the
-- time the units count at (the start of the window counted in).
--
-- window_outcome is the arithmetic of both fixed windows. With `counting`
-- (algorithm COUNTING_FIXED_WINDOW, envoyproxy/ratelimit's rule: INCRBY the
-- hits, then compare; its state is kept by counting_window.lua) every unit
-- asked for is counted, refused ones too, so the count may pass the limit:
-- allowed is min(units, limit - count) (0 at or over it), remaining
-- limit - count (0 at or over it). The core counts up to 2^64-1; here the
-- count stops at count_cap (2^52, above any limit the store accepts), which
-- changes no decision: past the limit only "past the limit" matters. count
-- and units are each at most 2^52 (units are capped by the caller), so
-- their sum is exact.
--
-- Rust twins: crates/tollgate-core/src/algorithm/fixed_window.rs, the
-- engine's transition this mirrors; src/call.rs sends its rule's fields
-- (algorithm FIXED_WINDOW or COUNTING_FIXED_WINDOW) and reads what it
-- returns; src/refund.rs gives its units back through refund.lua.

local count_cap = 4503599627370496 -- 2^52

-- The window's arithmetic, whatever keeps its count: `units` asked at `now`
-- of the window `index` that had counted `count`. Returns allowed,
-- remaining, retry_after, reset_after (microseconds) and the count
-- afterwards (count_cap at most).
local function window_outcome(limit, window, now, index, count, units, counting)
  local room = limit - count
  if room < 0 then
    room = 0
  end
  local allowed = math.min(units, room)
  if counting then
    count = count + units
    if count > count_cap then
      count = count_cap
    end
  else
    count = count + allowed
  end
  local remaining = limit - count
  if remaining < 0 then
    remaining = 0
  end
  local until_end = (index + 1) * window - now
  local retry_after = 0
  if allowed < units or (counting and count > limit) then
    -- Refused, or a counting window past its limit (a look says so too).
    retry_after = until_end
  end
  local reset_after = 0
  if count > 0 then
    reset_after = until_end
  end
  return allowed, remaining, retry_after, reset_after, count
end

-- `reserved_from`: the real now of a reservation charging at `now` (its
-- turn, acquire.lua's charge_at); nil for a decision. A state reserved into
-- before its window began, "version:k:count:1" (the engine's
-- FixedWindow::reserved_ahead), allows nothing to a decision before that
-- window begins: requests queue behind it (FixedWindow::queued_ahead);
-- nothing is written, retry_after is the wait until one unit fits,
-- reset_after until its count ends (its start when it counts nothing).
local function fixed_window(key, state, version, limit, window, now, units, write, reserved_from)
  local index = floor_div(now, window)
  local count = 0
  local stored, stored_count, ahead = read_state(state, version)
  if stored then
    if ahead == 1 and stored > index then
      local start = stored * window
      local turn, reset = start, start
      if stored_count >= limit then
        turn = start + window
      end
      if stored_count > 0 then
        reset = start + window
      end
      local retry_after = 0
      if units > 0 then
        retry_after = turn - now
      end
      return 0, 0, retry_after, reset - now, state, start
    end
    -- A time older than the stored window counts against the stored window.
    if stored > index then
      index = stored
    end
    if stored == index then
      count = stored_count
    else
      ahead = 0
    end
  end
  if reserved_from ~= nil and floor_div(reserved_from, window) < index then
    ahead = 1
  end
  local allowed, remaining, retry_after, reset_after
  allowed, remaining, retry_after, reset_after, count =
    window_outcome(limit, window, now, index, count, units, false)
  if write then
    state = store(key, state_text(version, index, count, ahead), reset_after)
  end
  return allowed, remaining, retry_after, reset_after, state, index * window
end

-- The earliest time (us, never before `now`) at which `units` fit, changing
-- nothing (the engine's FixedWindow::earliest, a reservation's first half):
-- now, or the start of the stored window when it lies ahead, when they fit
-- in it; else the start of the window after it. nil when `units` is more
-- than `limit`, which never fits.
local function fixed_window_earliest(state, version, limit, window, now, units)
  if units > limit then
    return nil
  end
  local index = floor_div(now, window)
  local count = 0
  local stored, stored_count = read_state(state, version)
  if stored then
    if stored > index then
      index = stored
    end
    if stored == index then
      count = stored_count
    end
  end
  if count + units <= limit then
    return math.max(index * window, now)
  end
  return (index + 1) * window
end

-- A refund (lua/give_back.lua; the engine's FixedWindow::give_back): `units`
-- come off the count of the window a request at `now` counts in (the stored
-- one when `now` is older), not below 0, the key kept to that window's end;
-- a count brought to 0 drops the key (fresh, as if never charged); a state
-- of an earlier window is left as it is (it counts nothing at `now`).
-- Returns the state the key holds afterwards (false: none).
local function fixed_window_give_back(key, state, version, window, now, units)
  local index, count, ahead = read_state(state, version)
  if not index or floor_div(now, window) > index then
    return state
  end
  count = count - units
  if count < 0 then
    count = 0
  end
  if count == 0 and not (ahead == 1 and floor_div(now, window) < index) then
    redis.call('DEL', key)
    return false
  end
  -- A window reserved into ahead of now keeps its place at 0, as the
  -- engine's FixedWindow::give_back keeps it.
  return store(key, state_text(version, index, count, ahead), (index + 1) * window - now)
end

-- Charges `units` at `now` whatever the window has left, the count at most
-- `limit + overdraft` (never lowered), in the window a request at `now`
-- counts in: the stored one when `now` is in it or older (the engine's
-- FixedWindow::overdraw). Returns the state the key holds.
local function fixed_window_overdraw(key, state, version, limit, window, now, units, overdraft)
  if units == 0 then
    return state
  end
  local index = floor_div(now, window)
  local count, ahead = 0, 0
  local stored, stored_count, stored_ahead = read_state(state, version)
  if stored and stored >= index then
    index, count, ahead = stored, stored_count, stored_ahead
  end
  local charged = math.min(count + units, limit + overdraft)
  if charged > count then
    count = charged
  end
  return store(key, state_text(version, index, count, ahead), (index + 1) * window - now)
end

-- The calendar window (the engine's FixedWindow over a Calendar; Rust twin
-- crates/tollgate-core/src/algorithm/fixed_window.rs): `limit` units per
-- period of a calendar, counted as the fixed window counts. Lua knows no
-- time zone rules: the caller sends `bounds` (src/plans.rs,
-- `ScriptRule::fields`), times in microseconds computed by core around the
-- caller's clock: the start of the period before the caller's, the start and
-- the end of the caller's, the end of the period after it, and the ends of
-- further periods as far as a waiting request's turn may lie. The
-- script's own now (Redis's TIME, or the caller's) picks the period among
-- them, so a request that arrives across a boundary counts in the period
-- Redis's clock is in, whatever the caller's said; only clocks more than a
-- period apart fail. State "version:end:count", `end` the end (us) of the
-- period counted in: a now before it counts there (a time older than the
-- stored period counts against it, as the fixed window's does).

-- The end of the period holding `now` among `bounds`; nil when `now` lies
-- outside them.
local function calendar_end(bounds, now)
  if now < bounds[1] then
    return nil
  end
  for index = 2, #bounds do
    if now < bounds[index] then
      return bounds[index]
    end
  end
  return nil
end

-- The end of the period a request at `now` counts in, and its count.
local function calendar_period(state, version, bounds, now)
  local stored, stored_count = read_state(state, version)
  if stored and now < stored then
    return stored, stored_count
  end
  local window_end = calendar_end(bounds, now)
  if window_end == nil then
    error('the calendar boundaries sent do not hold the time decided at: '
      .. 'the caller\'s clock and Redis\'s are more than a period apart')
  end
  return window_end, 0
end

-- Returns what fixed_window returns; the time counted at is end - 1, a time
-- of the period counted in (what a refund names, refund.lua).
local function calendar_window(key, state, version, limit, bounds, now, units, write)
  local window_end, count = calendar_period(state, version, bounds, now)
  local allowed, remaining, retry_after, reset_after
  -- window_outcome's window end is (index + 1) * window: index 0 and the
  -- period's end as the window.
  allowed, remaining, retry_after, reset_after, count =
    window_outcome(limit, window_end, now, 0, count, units, false)
  if write then
    state = store(key, state_text(version, window_end, count), reset_after)
  end
  return allowed, remaining, retry_after, reset_after, state, window_end - 1
end

-- The earliest time units fit (the engine's FixedWindow::earliest): now,
-- or never (nil): a calendar window does not wait for its next period.
local function calendar_window_earliest(state, version, limit, bounds, now, units)
  if units > limit then
    return nil
  end
  local _, count = calendar_period(state, version, bounds, now)
  if count + units <= limit then
    return now
  end
  return nil
end

-- A refund (give_back.lua; the engine's FixedWindow::give_back): `units`
-- come off the count of the period a request at `now` counts in when it is
-- the stored one, not below 0; a count brought to 0 drops the key.
local function calendar_window_give_back(key, state, version, now, units)
  local stored, count = read_state(state, version)
  if not stored or now >= stored then
    return state
  end
  count = count - units
  if count <= 0 then
    redis.call('DEL', key)
    return false
  end
  return store(key, state_text(version, stored, count), stored - now)
end

-- Charges `units` at `now` whatever the period has left, the count at most
-- `limit + overdraft` (the engine's FixedWindow::overdraw over a calendar).
local function calendar_window_overdraw(key, state, version, limit, bounds, now, units, overdraft)
  if units == 0 then
    return state
  end
  local window_end, count = calendar_period(state, version, bounds, now)
  local charged = math.min(count + units, limit + overdraft)
  if charged > count then
    count = charged
  end
  return store(key, state_text(version, window_end, count), window_end - now)
end
