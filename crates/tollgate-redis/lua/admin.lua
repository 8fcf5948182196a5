-- Admin calls on one key's plan, atomically. KEYS: state hash, log list, tier
-- key. ARGV[1]: 'tier' (ARGV[2] = the new tier, 'default' for none) or
-- 'reset'.
-- tier: sets the tier; a change of tier drops the state. Returns 1.
-- reset: drops the state; returns 1 when there was any.
if ARGV[1] == 'tier' then
  local current = redis.call('GET', KEYS[3]) or 'default'
  if current ~= ARGV[2] then
    redis.call('DEL', KEYS[1], KEYS[2])
    if ARGV[2] == 'default' then
      redis.call('DEL', KEYS[3])
    else
      redis.call('SET', KEYS[3], ARGV[2])
    end
  end
  return 1
end
return redis.call('DEL', KEYS[1], KEYS[2]) > 0 and 1 or 0
