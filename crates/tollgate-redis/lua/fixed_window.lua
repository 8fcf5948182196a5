-- The fixed window: `limit` units per window [k*W, (k+1)*W) aligned to the
-- epoch. State (a hash): v = rule version, k = window index, c = units counted.
-- Returns allowed, remaining, retry_after, reset_after (microseconds).

local function fixed_window(key, version, limit, window, now, units, write)
  local state = redis.call('HMGET', key, 'v', 'k', 'c')
  local index = floor_div(now, window)
  local count = 0
  if state[1] == version then
    local stored = tonumber(state[2])
    -- A time older than the stored window counts against the stored window.
    if stored > index then
      index = stored
    end
    if stored == index then
      count = tonumber(state[3])
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
    redis.call('HSET', key, 'v', version, 'k', int(index), 'c', int(count))
    keep_for(reset_after, key)
  end
  return allowed, limit - count, retry_after, reset_after
end
