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

fn main() {
    redis_peers::print();
    println!("cargo::rustc-check-cfg=cfg(has_envoy)");
    for variable in ["ENVOY", "PATH", "CI"] {
        println!("cargo::rerun-if-env-changed={variable}");
    }
    let in_ci = std::env::var("CI").is_ok_and(|value| value == "true");
    let named = std::env::var_os("ENVOY").is_some_and(|value| !value.is_empty());
    let on_path = std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|directory| directory.join("envoy").is_file())
    });
    if in_ci || named || on_path {
        println!("cargo::rustc-cfg=has_envoy");
    }
}
