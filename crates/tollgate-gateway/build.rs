//! The cfgs of this crate's tests that need a peer, so that a test that
//! cannot run is reported as ignored rather than as passed: `has_redis` and
//! `has_redis_cluster` for the Redis tests (`tests/redis.rs`), set as for the
//! Redis store's own tests (see `crates/tollgate-redis/build.rs`), and
//! `has_nginx` / `has_caddy` / `has_traefik` for the forward-auth tests
//! (`tests/forward_auth.rs`) and `has_chromedriver` for the dashboard's
//! browser test (`tests/dashboard.rs`, Debian's chromium and chromium-driver)
//! when a file of that name is in a directory of the `PATH` or in
//! `/usr/sbin` (where Debian puts nginx), and always under `CI=true` (there a
//! missing peer fails its test).
//!
//! The script reruns when `PATH` or `CI` changes, not when a proxy is
//! installed into a directory already searched: after `apt-get install
//! nginx caddy`, `touch crates/tollgate-gateway/build.rs`.

mod redis_peers {
    include!("../tollgate-redis/build/redis_peers.rs");

    /// Prints the Redis cfgs.
    pub(super) fn print() {
        main();
    }
}

fn main() {
    redis_peers::print();
    for variable in ["PATH", "CI"] {
        println!("cargo::rerun-if-env-changed={variable}");
    }
    let in_ci = std::env::var("CI").is_ok_and(|value| value == "true");
    let path = std::env::var_os("PATH").unwrap_or_default();
    let directories: Vec<_> = std::env::split_paths(&path)
        .chain([std::path::PathBuf::from("/usr/sbin")])
        .collect();
    for name in ["nginx", "caddy", "traefik", "chromedriver"] {
        println!("cargo::rustc-check-cfg=cfg(has_{name})");
        let found = directories
            .iter()
            .any(|directory| directory.join(name).is_file());
        if in_ci || found {
            println!("cargo::rustc-cfg=has_{name}");
        }
    }
}
