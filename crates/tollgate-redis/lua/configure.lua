-- Replaces the shared default policy and bumps its generation, atomically.
-- KEYS[1]: the config hash, PREFIX:config. ARGV[1]: the policy as JSON.
-- Returns the new generation.
--
-- Rust twins: src/admin.rs (`configure`) calls it and publishes the
-- generation on the channel PREFIX:config; src/policy_sync.rs reads the two
-- fields (CONFIG_POLICY, CONFIG_GENERATION: constants of common.lua, which
-- src/script.rs puts before this file, and src/protocol.rs) on every gateway.
--
-- A hash that lost its generation (Redis restarted without persistence, the
-- key was evicted or deleted) starts again from Redis's clock in
-- microseconds, past any generation counted before, so that no generation
-- comes back into force (states written under it would count again).
redis.call('HSET', KEYS[1], CONFIG_POLICY, ARGV[1])
if redis.call('HEXISTS', KEYS[1], CONFIG_GENERATION) == 0 then
  local time = redis.call('TIME')
  redis.call('HSET', KEYS[1], CONFIG_GENERATION,
    time[1] .. string.format('%06d', tonumber(time[2])))
end
return redis.call('HINCRBY', KEYS[1], CONFIG_GENERATION, 1)
