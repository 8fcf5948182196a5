//! The codes of the scripts' argument and reply protocol, one constant each.
//! Every constant here has a Lua twin of the same name among the locals at the
//! top of `lua/common.lua` (which every script starts with); the test below
//! holds the two sides to the same values.

/// The time argument that makes a script read Redis's `TIME` (otherwise the
/// argument is the caller's time in microseconds). Lua: `REDIS_TIME`.
pub(crate) const REDIS_TIME: &str = "";

/// A rule's algorithm code: the fixed window (`lua/fixed_window.lua`). Lua:
/// `FIXED_WINDOW`.
pub(crate) const FIXED_WINDOW: &str = "f";

/// A rule's algorithm code: the fixed window that counts refused units too
/// (`lua/counting_window.lua`, its state a hash counted with one `HINCRBY`;
/// core's `Policy::counts_refused`, envoyproxy/ratelimit's `INCRBY` then
/// compare).
/// Its limits are charged whatever the request's other limits decide, and
/// given back only when the request fails (a cluster's split request whose
/// last step fails, as past its deadline). Lua: `COUNTING_FIXED_WINDOW`.
pub(crate) const COUNTING_FIXED_WINDOW: &str = "c";

/// A rule's algorithm code: the sliding log (`lua/sliding_log.lua`), the one
/// rule whose limits also send their log key. Lua: `SLIDING_LOG`.
pub(crate) const SLIDING_LOG: &str = "s";

/// A rule's algorithm code: the token bucket (`lua/token_bucket.lua`). Lua:
/// `TOKEN_BUCKET`.
pub(crate) const TOKEN_BUCKET: &str = "t";

/// A rule's algorithm code: the calendar window (`calendar_window` in
/// `lua/fixed_window.lua`), whose window field is the four boundaries
/// (µs) core computed around the caller's clock, separated by spaces. Lua:
/// `CALENDAR_WINDOW`.
pub(crate) const CALENDAR_WINDOW: &str = "k";

/// The give-back script's overdraft argument of a refund (otherwise the
/// argument is the overdraft of a charge past the limit, in units). Lua:
/// `NO_OVERDRAFT`.
pub(crate) const NO_OVERDRAFT: &str = "";

/// The fields of one rule in the acquire script's arguments: algorithm,
/// limit, window (µs), burst, state version (the refund script takes the same
/// five in the same order). Lua: `RULE_FIELDS`.
pub(crate) const RULE_FIELDS: usize = 5;

/// A request's write flag: decide and store. Lua: `WRITE`.
pub(crate) const WRITE: &str = "1";

/// A request's write flag: decide without storing anything (a check, a
/// refusal read, `inspect`). Lua: `READ_ONLY`.
pub(crate) const READ_ONLY: &str = "0";

/// The expected tier of a limit that has none to check (a policy limit); no
/// tier is named so. Lua: `NO_TIER`.
pub(crate) const NO_TIER: &str = "";

/// The tier of a plan without one (no tier key, or an empty one): the core's
/// [`DEFAULT_TIER`](tollgate_core::DEFAULT_TIER). Lua: `DEFAULT_TIER`.
pub(crate) const DEFAULT_TIER: &str = tollgate_core::DEFAULT_TIER;

/// A request's status in the acquire script's reply: decided, followed by one
/// text of [`OUTCOME_FIELDS`] decimal numbers per limit, each separated from
/// the next by one space (the give-back script's reply follows it with
/// numbers). Lua: `DECIDED`.
pub(crate) const DECIDED: u64 = 0;

/// A request's status in the acquire script's reply: a plan is on another tier
/// than the one expected, followed by the limit's index (1-based) and the
/// actual tier; nothing of the request was decided. Lua: `TIER_CHANGED`.
pub(crate) const TIER_CHANGED: u64 = 1;

/// A request's status in the acquire script's reply: it failed inside the
/// script (alone, not the call it shares), followed by the message. Lua:
/// `FAILED`.
pub(crate) const FAILED: u64 = 2;

/// A request's status in the acquire script's reply: Redis ran it past its
/// deadline (after a stall; its caller has answered without it), so it read
/// and wrote nothing; no fields follow. Lua: `EXPIRED`.
pub(crate) const EXPIRED: u64 = 3;

/// A request's deadline when it has none: only for a request that does not
/// write (`inspect`'s read); the script refuses a write without a deadline
/// ([`FAILED`]). Otherwise the deadline is microseconds on Redis's clock.
/// Lua: `NO_DEADLINE`.
pub(crate) const NO_DEADLINE: &str = "";

/// The numbers of one limit's outcome in the acquire script's reply: the time
/// its units count at, allowed, remaining, retry_after, reset_after. Lua:
/// `OUTCOME_FIELDS`.
pub(crate) const OUTCOME_FIELDS: usize = 5;

/// A request's status in the acquire script's reply: a request that may wait
/// (sent with a `max_wait`) was decided, followed by its wait (µs, 0 when
/// refused or served at once) and its outcomes as [`DECIDED`] has them.
/// Lua: `RESERVED`.
pub(crate) const RESERVED: u64 = 4;

/// A request's `max_wait` when it does not wait: decided as
/// `Limiter::acquire_units` decides. Otherwise microseconds (`reserve` in
/// `lua/acquire.lua`). Lua: `NO_WAIT`.
pub(crate) const NO_WAIT: &str = "";

/// The admin script's command that sets a key's tier (followed by the tier,
/// [`DEFAULT_TIER`] for none). Lua: `ADMIN_TIER`.
pub(crate) const ADMIN_TIER: &str = "tier";

/// The admin script's command that drops a key's state. Lua: `ADMIN_RESET`.
pub(crate) const ADMIN_RESET: &str = "reset";

/// The admin script's reply when it did something: a tier set, a state
/// dropped. Lua: `ADMIN_DONE`.
pub(crate) const ADMIN_DONE: i64 = 1;

/// The admin script's reply when a reset found no state. Lua: `ADMIN_NOTHING`.
pub(crate) const ADMIN_NOTHING: i64 = 0;

/// The field of `PREFIX:config` holding the shared default policy as JSON.
/// Lua: `CONFIG_POLICY`.
pub(crate) const CONFIG_POLICY: &str = "policy";

/// The field of `PREFIX:config` holding the default policy's generation,
/// bumped by every `configure`. Lua: `CONFIG_GENERATION`.
pub(crate) const CONFIG_GENERATION: &str = "generation";

#[cfg(test)]
mod tests {
    use super::*;

    /// Every constant as its Lua local is written in `lua/common.lua`.
    fn lua_twins() -> Vec<String> {
        fn text(name: &str, value: &str) -> String {
            format!("local {name} = '{value}'")
        }
        fn number(name: &str, value: impl std::fmt::Display) -> String {
            format!("local {name} = {value}")
        }
        vec![
            text("REDIS_TIME", REDIS_TIME),
            text("FIXED_WINDOW", FIXED_WINDOW),
            text("COUNTING_FIXED_WINDOW", COUNTING_FIXED_WINDOW),
            text("SLIDING_LOG", SLIDING_LOG),
            text("TOKEN_BUCKET", TOKEN_BUCKET),
            text("CALENDAR_WINDOW", CALENDAR_WINDOW),
            number("RULE_FIELDS", RULE_FIELDS),
            text("WRITE", WRITE),
            text("READ_ONLY", READ_ONLY),
            text("NO_TIER", NO_TIER),
            text("DEFAULT_TIER", DEFAULT_TIER),
            number("DECIDED", DECIDED),
            number("TIER_CHANGED", TIER_CHANGED),
            number("FAILED", FAILED),
            number("EXPIRED", EXPIRED),
            text("NO_DEADLINE", NO_DEADLINE),
            number("OUTCOME_FIELDS", OUTCOME_FIELDS),
            number("RESERVED", RESERVED),
            text("NO_WAIT", NO_WAIT),
            text("NO_OVERDRAFT", NO_OVERDRAFT),
            text("ADMIN_TIER", ADMIN_TIER),
            text("ADMIN_RESET", ADMIN_RESET),
            number("ADMIN_DONE", ADMIN_DONE),
            number("ADMIN_NOTHING", ADMIN_NOTHING),
            text("CONFIG_POLICY", CONFIG_POLICY),
            text("CONFIG_GENERATION", CONFIG_GENERATION),
        ]
    }

    #[test]
    fn the_lua_constants_are_the_rust_constants() {
        let common = include_str!("../lua/common.lua");
        let declared: Vec<&str> = common
            .lines()
            .filter(|line| {
                line.strip_prefix("local ").is_some_and(|rest| {
                    rest.split(' ').next().is_some_and(|name| {
                        !name.is_empty() && name.chars().all(|c| c.is_ascii_uppercase() || c == '_')
                    })
                })
            })
            // The declaration without its trailing comment.
            .map(|line| line.split(" --").next().unwrap_or(line).trim_end())
            .collect();
        assert_eq!(declared, lua_twins(), "lua/common.lua and protocol.rs");
    }

    #[test]
    fn no_code_is_two_things() {
        let algorithms = [
            FIXED_WINDOW,
            COUNTING_FIXED_WINDOW,
            SLIDING_LOG,
            TOKEN_BUCKET,
            CALENDAR_WINDOW,
        ];
        assert!(algorithms.iter().all(|code| !code.is_empty()));
        assert!(
            algorithms
                .iter()
                .enumerate()
                .all(|(at, code)| algorithms[at + 1..].iter().all(|other| other != code))
        );
        assert_ne!(WRITE, READ_ONLY);
        assert_ne!(NO_TIER, DEFAULT_TIER);
        assert_ne!(ADMIN_TIER, ADMIN_RESET);
        assert_ne!(ADMIN_DONE, ADMIN_NOTHING);
        let statuses = [DECIDED, TIER_CHANGED, FAILED, EXPIRED, RESERVED];
        assert!(
            statuses
                .iter()
                .enumerate()
                .all(|(at, status)| { statuses[at + 1..].iter().all(|other| other != status) })
        );
    }
}
