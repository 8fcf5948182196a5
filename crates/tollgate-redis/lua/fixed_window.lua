-- The fixed window: `limit` units per window [k*W, (k+1)*W) aligned to the
-- epoch. State "version:k:count". Returns allowed, remaining, retry_after,
-- reset_after (microseconds), the state the key holds afterwards and the
-- time the units count at (the start of the window counted in).
--
-- Rust twins: crates/tollgate-core/src/algorithm/fixed_window.rs, the
-- engine's transition this mirrors; src/call.rs sends its rule's fields
-- (algorithm FIXED_WINDOW) and reads what it returns; src/refund.rs gives its
-- units back through refund.lua.

local function fixed_window(key, state, version, limit, window, now, units, write)
  local index = floor_div(now, window)
  local count = 0
  local stored, stored_count = read_state(state, version)
  if stored then
    -- A time older than the stored window counts against the stored window.
    if stored > index then
      index = stored
    end
    if stored == index then
      count = stored_count
    end
  end
  local allowed = math.min(units, limit - count)
  count = count + allowed
  local until_end = (index + 1) * window - now
  local retry_after = 0
  if allowed < units then
    retry_after = until_end
  end
  local reset_after = 0
  if count > 0 then
    reset_after = until_end
  end
  if write then
    state = store(key, string.format('%s:%d:%d', version, index, count), reset_after)
  end
  return allowed, limit - count, retry_after, reset_after, state, index * window
end
