-- Admin calls on one key's plan, atomically. KEYS: state, log list, tier
-- key, then the state and log keys of the further policies of plans written
-- as lists (every name any plan has: they are the key's state too). ARGV[1]: ADMIN_TIER (ARGV[2] = the new tier, DEFAULT_TIER for none) or
-- ADMIN_RESET.
-- ADMIN_TIER: sets the tier; a change of tier drops the state. Returns
-- ADMIN_DONE.
-- ADMIN_RESET: drops the state; returns ADMIN_DONE when there was any,
-- ADMIN_NOTHING otherwise.
--
-- Rust twin: src/admin.rs (`assign_tier`, `reset`) builds these arguments and
-- reads the reply; the codes are the constants of common.lua (which
-- src/script.rs puts before this file) and src/protocol.rs.
-- Drops every state key of the plan; how many there were.
local function drop_state()
  local keys = {KEYS[1], KEYS[2]}
  for index = 4, #KEYS do
    keys[#keys + 1] = KEYS[index]
  end
  return redis.call('DEL', unpack(keys))
end

if ARGV[1] == ADMIN_TIER then
  local current = redis.call('GET', KEYS[3]) or DEFAULT_TIER
  if current ~= ARGV[2] then
    drop_state()
    if ARGV[2] == DEFAULT_TIER then
      redis.call('DEL', KEYS[3])
    else
      redis.call('SET', KEYS[3], ARGV[2])
    end
  end
  return ADMIN_DONE
end
return drop_state() > 0 and ADMIN_DONE or ADMIN_NOTHING
