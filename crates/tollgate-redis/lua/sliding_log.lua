-- The sliding log: a unit allowed at t counts while now - W < t. State: a hash
-- (v = rule version, n = units counted, z = newest run's time) and a list of
-- runs "time:count", oldest first, so a batch is one run and the list holds at
-- most min(limit, W) runs. Expired runs are popped from the front.

local function parse_run(run)
  local separator = string.find(run, ':', 1, true)
  return tonumber(string.sub(run, 1, separator - 1)), tonumber(string.sub(run, separator + 1))
end

local function sliding_log(key, log, version, limit, window, now, units, write)
  local state = redis.call('HMGET', key, 'v', 'n', 'z')
  local counted = 0
  local newest = nil
  if state[1] == version then
    counted = tonumber(state[2])
    newest = tonumber(state[3])
  elseif write then
    redis.call('DEL', log)
  end
  -- A time older than the newest run is treated as the newest run's time.
  if newest ~= nil and newest > now then
    now = newest
  end
  -- Expire from the front (reading only, when not writing).
  local oldest = nil
  local index = 0
  while counted > 0 do
    local at, count = parse_run(redis.call('LINDEX', log, index))
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
  local allowed = math.min(units, limit - counted)
  if allowed > 0 then
    if newest == now and counted > 0 then
      local at, count = parse_run(redis.call('LINDEX', log, -1))
      if write then
        redis.call('LSET', log, -1, int(at) .. ':' .. int(count + allowed))
      end
    elseif write then
      redis.call('RPUSH', log, int(now) .. ':' .. int(allowed))
    end
    if oldest == nil then
      oldest = now
    end
    newest = now
    counted = counted + allowed
  end
  local retry_after = 0
  if allowed < units then
    retry_after = oldest + window - now
  end
  local reset_after = 0
  if counted > 0 then
    reset_after = newest + window - now
  end
  if write then
    if counted > 0 then
      redis.call('HSET', key, 'v', version, 'n', int(counted), 'z', int(newest))
    end
    keep_for(reset_after, key, log)
  end
  return allowed, limit - counted, retry_after, reset_after
end
