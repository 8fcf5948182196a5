-- The fixed window counting refused units (algorithm COUNTING_FIXED_WINDOW,
-- envoyproxy/ratelimit's rule: INCRBY the hits, then compare), kept so that
-- a hit costs Redis one command: the state is a hash at the state key with
-- one field, "version:k", holding the count of window k, the newest window
-- the key has counted in; the hash lives to that window's end. A hit is one
-- HINCRBY of its window's field; only the first hit of a window (the field
-- was absent) looks further: a field of a newer window (the time went back:
-- a replayed `now`, a replica whose clock lags) takes the units instead, as
-- the engine counts an older time in its newest window; fields of older
-- windows and of other versions are dropped, and the hash is given its TTL.
-- So the hash never holds more than one field of its version, and a field
-- that HINCRBY finds already there is the newest window's.
--
-- A string at the key is another rule's state (a fixed window, a token
-- bucket, a sliding log's state of a policy since changed), or a counting
-- window's written by a build before this one, which kept it as a string:
-- HINCRBY's WRONGTYPE drops it and counts afresh (so after that upgrade a
-- window starts again at 0). The other rules read states with MGET
-- (read_string), which reads this hash as none. A build before this one
-- reads the hash with GET and fails (WRONGTYPE): replicas sharing a Redis
-- are upgraded across this change together, or the new ones given a prefix
-- of their own (DESIGN.md, the Redis store).
--
-- The decisions are window_outcome's (fixed_window.lua), counting; the
-- returns are fixed_window's (allowed, remaining, retry_after, reset_after,
-- the state: always nil here, the time the units count at).
--
-- Rust twins: crates/tollgate-core/src/algorithm/fixed_window.rs (its
-- `counting` flag); src/call.rs, src/give_back.rs and src/refund.rs send the
-- rule and read the replies of acquire.lua, give_back.lua and refund.lua,
-- which call the functions below.

-- The field of window `index` under `version`, remembered for the rest of
-- the call (its requests mostly share a rule and so a window).
local counting_fields = {}
local function counting_field(version, index)
  local known = counting_fields[version]
  if known and known[1] == index then
    return known[2]
  end
  local field = version .. ':' .. decimal(index)
  counting_fields[version] = {index, field}
  return field
end

-- The version and window index a field names; nil, nil for another shape.
local function parse_field(name)
  local version, index = string.match(name, '^(.*):(%d+)$')
  return version, tonumber(index)
end

-- The newest window of `version` the hash at `key` holds: its index and
-- count, or nil (no hash, no field of this version, or a string state).
local function counting_read(key, version)
  local fields = redis.pcall('HGETALL', key)
  if fields.err then
    return nil
  end
  local index, count
  for at = 1, #fields, 2 do
    local stored_version, stored = parse_field(fields[at])
    if stored_version == version and stored and (not index or stored > index) then
      index, count = stored, tonumber(fields[at + 1])
    end
  end
  return index, count
end

-- The first units of window `index` were just counted in `field` (it was
-- absent): counts them in a newer window of `version` instead when the hash
-- holds one (HDEL of `field`, HINCRBY of the newer one), drops every other
-- field, and gives the hash its TTL when the window is new. Returns the
-- index and field counted in and the count afterwards.
local function counting_first_units(key, version, window, now, index, field, units, count)
  local fields = redis.call('HKEYS', key)
  local counted_index, counted_field = index, field
  for _, name in ipairs(fields) do
    local stored_version, stored = parse_field(name)
    if stored_version == version and stored and stored > counted_index then
      counted_index, counted_field = stored, name
    end
  end
  if counted_index ~= index then
    count = redis.call('HINCRBY', key, counted_field, units)
  end
  local others = {}
  for _, name in ipairs(fields) do
    if name ~= counted_field then
      others[#others + 1] = name
    end
  end
  if #others > 0 then
    redis.call('HDEL', key, unpack(others))
  end
  if counted_index == index then
    -- To the window's end and one window more: later hits set no TTL, so
    -- the margin keeps the count for callers whose clocks lag the first
    -- one's (replicas on their own clocks, as `tollgate rls` runs; the Go
    -- service's EXPIRE of a whole unit after each hit keeps its keys as long).
    redis.call('PEXPIRE', key, decimal(ttl_ms((index + 2) * window - now)))
  end
  return counted_index, counted_field, count
end

local function counting_window(key, version, limit, window, now, units, write)
  local index = floor_div(now, window)
  if not write then
    local stored, count = counting_read(key, version)
    local before = 0
    if stored then
      if stored > index then
        index = stored
      end
      if stored == index then
        before = count
      end
    end
    local allowed, remaining, retry_after, reset_after =
      window_outcome(limit, window, now, index, before, units, true)
    return allowed, remaining, retry_after, reset_after, nil, index * window
  end
  local field = counting_field(version, index)
  local count = redis.pcall('HINCRBY', key, field, units)
  if type(count) == 'table' then
    if not string.find(count.err, '^WRONGTYPE') then
      -- Any other failure (Redis out of memory, say) fails the request,
      -- with nothing dropped.
      error(count)
    end
    -- A string: another rule's state, or a counting window's written by a
    -- build before this one (see the top of this file): it counts nothing here.
    redis.call('DEL', key)
    count = redis.call('HINCRBY', key, field, units)
  end
  if count == units then
    index, field, count = counting_first_units(key, version, window, now, index, field, units, count)
  end
  if count > count_cap then
    -- The count stops at count_cap, as window_outcome's does.
    redis.call('HSET', key, field, count_cap)
  end
  local allowed, remaining, retry_after, reset_after =
    window_outcome(limit, window, now, index, count - units, units, true)
  return allowed, remaining, retry_after, reset_after, nil, index * window
end

-- A refund (lua/give_back.lua; the engine's FixedWindow::give_back): as
-- fixed_window_give_back, on the hash: `units` come off the count of the
-- window a request at `now` counts in (the newest one when `now` is older),
-- not below 0; a count brought to 0 drops the key; a state of an earlier
-- window is left as it is. A count at count_cap gives nothing back: what
-- was counted past it is no longer known.
local function counting_window_give_back(key, version, window, now, units)
  local index, count = counting_read(key, version)
  if units <= 0 or not index or floor_div(now, window) > index or count >= count_cap then
    -- (HINCRBY takes no -0: nothing to give back is no command.)
    return
  end
  if count <= units then
    redis.call('DEL', key)
  else
    redis.call('HINCRBY', key, counting_field(version, index), -units)
  end
end

-- Undoes a charge of `units` counted in the window starting at `counted_at`
-- (lua/refund.lua): returns the units given back, 0 when the window has
-- moved on, its count is below `units` or at count_cap.
local function counting_window_refund(key, version, window, counted_at, units)
  if units <= 0 then
    return 0
  end
  local field = counting_field(version, floor_div(counted_at, window))
  local count = redis.pcall('HGET', key, field)
  if type(count) ~= 'string' then
    return 0
  end
  count = tonumber(count)
  if not count or count < units or count >= count_cap then
    return 0
  end
  if count == units then
    redis.call('DEL', key)
  else
    redis.call('HINCRBY', key, field, -units)
  end
  return units
end
