//! The Lua scripts, each assembled from `lua/common.lua` (the shared helpers
//! and the protocol's constants, see [`protocol`](crate::protocol)) and the
//! files it runs. Their arguments are built and their replies read in
//! [`call`](crate::call) (acquire), [`refund`](crate::refund) (refund),
//! [`give_back`](crate::give_back) (give back) and [`admin`](crate::admin)
//! (admin, configure).

use redis::Script;

/// The acquire script: the shared helpers, the algorithms (the fixed window,
/// the one counting refused units, the sliding log, the token bucket), the entry
/// (`lua/acquire.lua`).
pub(crate) fn acquire() -> Script {
    Script::new(concat!(
        include_str!("../lua/common.lua"),
        include_str!("../lua/fixed_window.lua"),
        include_str!("../lua/counting_window.lua"),
        include_str!("../lua/sliding_log.lua"),
        include_str!("../lua/token_bucket.lua"),
        include_str!("../lua/acquire.lua"),
    ))
}

/// The refund script: gives back what a request took from one limit (see
/// `lua/refund.lua`).
pub(crate) fn refund() -> Script {
    Script::new(concat!(
        include_str!("../lua/common.lua"),
        include_str!("../lua/fixed_window.lua"),
        include_str!("../lua/counting_window.lua"),
        include_str!("../lua/sliding_log.lua"),
        include_str!("../lua/token_bucket.lua"),
        include_str!("../lua/refund.lua"),
    ))
}

/// The give-back script: refunds, units given back to limits that took
/// them (see `lua/give_back.lua`).
pub(crate) fn give_back() -> Script {
    Script::new(concat!(
        include_str!("../lua/common.lua"),
        include_str!("../lua/fixed_window.lua"),
        include_str!("../lua/counting_window.lua"),
        include_str!("../lua/sliding_log.lua"),
        include_str!("../lua/token_bucket.lua"),
        include_str!("../lua/give_back.lua"),
    ))
}

/// The admin script: tier assignment and reset (`lua/admin.lua`).
pub(crate) fn admin() -> Script {
    Script::new(concat!(
        include_str!("../lua/common.lua"),
        include_str!("../lua/admin.lua"),
    ))
}

/// The configure script: replaces the shared default policy and bumps its
/// generation (`lua/configure.lua`).
pub(crate) fn configure() -> Script {
    Script::new(concat!(
        include_str!("../lua/common.lua"),
        include_str!("../lua/configure.lua"),
    ))
}
