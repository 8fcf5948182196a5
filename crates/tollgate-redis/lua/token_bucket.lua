-- The token bucket: `burst` tokens, full at the first request, refilled at
-- limit / W per microsecond. Time is counted in microseconds x limit, one token
-- is worth W of those units; the state is the scaled time at which the bucket
-- is full again, kept as full_at = T * limit + r (0 <= r < limit) so that only
-- differences from now (at most burst x W) are ever multiplied.
-- State "version:T:r". Returns what the fixed window returns; the units
-- count at now.
--
-- Rust twins: crates/tollgate-core/src/algorithm/token_bucket.rs, the
-- engine's transition this mirrors; src/call.rs sends its rule's fields
-- (algorithm TOKEN_BUCKET) and reads what it returns; src/refund.rs gives its
-- tokens back through refund.lua.

local function token_bucket(key, state, version, limit, window, burst, now, units, write)
  local capacity = burst * window
  local full_t = now
  local full_r = 0
  local deficit = 0
  local t, r = read_state(state, version)
  if t and (t > now or (t == now and r > 0)) then
    full_t = t
    full_r = r
    if t - now > ceil_div(capacity, limit) + 1 then
      -- An old `now` (a lagging clock): no token is there, and the waits are
      -- computed without the large product (t - now) * limit.
      local lag = t - now
      local retry_after = 0
      if units > 0 then
        retry_after = lag + ceil_div(r - (capacity - window), limit)
      end
      return 0, 0, retry_after, lag + ceil_div(r, limit), state, now
    end
    deficit = (t - now) * limit + r
  end
  local available = 0
  if capacity > deficit then
    available = floor_div(capacity - deficit, window)
  end
  local allowed = math.min(units, available)
  local added = full_r + allowed * window
  local carry = floor_div(added, limit)
  full_t = full_t + carry
  full_r = added - carry * limit
  deficit = deficit + allowed * window
  local retry_after = 0
  if allowed < units then
    retry_after = ceil_div(deficit - (capacity - window), limit)
  end
  local reset_after = ceil_div(deficit, limit)
  if write then
    state = store(key, string.format('%s:%d:%d', version, full_t, full_r), reset_after)
  end
  return allowed, available - allowed, retry_after, reset_after, state, now
end

-- The earliest time (us, never before `now`) at which `units` tokens are
-- there, counting every reservation made (the engine's
-- TokenBucket::earliest): the time the bucket is full again plus their
-- worth, less the burst, computed from the stored time (never
-- (t - now) x limit). nil when `units` is more than `burst`, which never
-- fits.
local function token_bucket_earliest(state, version, limit, window, burst, now, units)
  local capacity = burst * window
  local worth = units * window
  if worth > capacity then
    return nil
  end
  local t, r = read_state(state, version)
  if t and (t > now or (t == now and r > 0)) then
    local at = t + ceil_div(r + worth - capacity, limit)
    if at < now then
      at = now
    end
    return at
  end
  return now
end

-- A refund (lua/give_back.lua; the engine's TokenBucket::give_back): up to
-- `units` tokens, at most `burst`, go back in: the time the bucket is full
-- again moves back by their worth (at most burst x W, below 2^52, so only
-- that and differences from the stored time are computed, never
-- (t - now) x limit); a bucket full at `now` afterwards is dropped (fresh,
-- as if never charged); one full already is left as it is. Returns the
-- state the key holds afterwards (false: none).
-- Takes `units` tokens at `now` whatever the bucket holds, at most
-- `overdraft` tokens below empty (the engine's TokenBucket::overdraw): the
-- time it is full again moves on by their worth, never back. Every product
-- stays below 2^52: the store sends only (burst + overdraft) x window below
-- it (src/plans.rs). Returns the state the key holds.
local function token_bucket_overdraw(key, state, version, limit, window, burst, now, units, overdraft)
  if units == 0 then
    return state
  end
  local deficit = 0
  local t, r = read_state(state, version)
  if t and (t > now or (t == now and r > 0)) then
    deficit = (t - now) * limit + r
  end
  local deepest = (burst + overdraft) * window
  local charged = deficit + math.min(units, burst + overdraft) * window
  if charged > deepest then
    charged = deepest
  end
  if charged <= deficit then
    return state
  end
  local carry = floor_div(charged, limit)
  local rest = charged - carry * limit
  return store(key, string.format('%s:%d:%d', version, now + carry, rest), ceil_div(charged, limit))
end

local function token_bucket_give_back(key, state, version, limit, window, burst, now, units)
  local t, r = read_state(state, version)
  if not t or t < now or (t == now and r == 0) then
    return state
  end
  local worth = math.min(units, burst) * window
  local carry = floor_div(worth, limit)
  t = t - carry
  r = r - (worth - carry * limit)
  if r < 0 then
    r = r + limit
    t = t - 1
  end
  if t < now or (t == now and r == 0) then
    redis.call('DEL', key)
    return false
  end
  return store(key, string.format('%s:%d:%d', version, t, r), (t - now) + ceil_div(r, limit))
end
