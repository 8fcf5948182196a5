//! Tells this crate's tests which peers they are to use, so that a test that
//! cannot run is reported as ignored rather than as passed: `has_redis` and
//! `has_redis_cluster` as for the Redis store's own tests (see
//! `crates/tollgate-redis/build.rs`), and `has_envoy` by `tollgate-rls`'s
//! rule (see `crates/tollgate-rls/build.rs`): `ENVOY` set (not empty), or a
//! file named `envoy` in a directory of the `PATH`, and always under
//! `CI=true`, where a missing peer fails its tests.

mod redis_peers {
    include!("../tollgate-redis/build/redis_peers.rs");

    /// Prints the Redis cfgs.
    pub(super) fn print() {
        main();
    }
}

mod envoy_peer {
    include!("../tollgate-rls/build/envoy_peer.rs");

    /// Prints the Envoy cfg.
    pub(super) fn print() {
        main();
    }
}

fn main() {
    redis_peers::print();
    envoy_peer::print();
}
