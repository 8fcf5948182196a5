-- Replaces the shared default policy and bumps its generation, atomically.
-- KEYS[1]: the config hash, PREFIX:config. ARGV[1]: the policy as JSON.
-- Returns the new generation.
--
-- Rust twins: src/admin.rs (`configure`) calls it and publishes the
-- generation on the channel PREFIX:config; src/policy_sync.rs reads the two
-- fields (CONFIG_POLICY, CONFIG_GENERATION: constants of common.lua, which
-- src/script.rs puts before this file, and src/protocol.rs) on every gateway.
redis.call('HSET', KEYS[1], CONFIG_POLICY, ARGV[1])
return redis.call('HINCRBY', KEYS[1], CONFIG_GENERATION, 1)
