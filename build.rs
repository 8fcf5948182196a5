//! The cfgs of this package's tests that need a peer: `has_redis` and
//! `has_redis_cluster` for the Redis tests (`tests/gateway_redis.rs`), set
//! as for the Redis store's own tests (see `crates/tollgate-redis/build.rs`),
//! and `has_kubernetes_validate` / `has_systemd_analyze` for the deployment
//! tests (`tests/deploy.rs`) when `python3` imports the PyPI package
//! kubernetes-validate / `systemd-analyze` is in a directory of the `PATH`,
//! and always under `CI=true` (there a missing one fails its test).

mod redis_peers {
    include!("crates/tollgate-redis/build/redis_peers.rs");

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
    println!("cargo::rustc-check-cfg=cfg(has_systemd_analyze)");
    let systemd_analyze =
        std::env::split_paths(&path).any(|directory| directory.join("systemd-analyze").is_file());
    if in_ci || systemd_analyze {
        println!("cargo::rustc-cfg=has_systemd_analyze");
    }
    // kubernetes-validate: a Python module, run as `python3 -m`.
    println!("cargo::rustc-check-cfg=cfg(has_kubernetes_validate)");
    let kubernetes_validate = std::process::Command::new("python3")
        .args(["-c", "import kubernetes_validate"])
        .output()
        .is_ok_and(|output| output.status.success());
    if in_ci || kubernetes_validate {
        println!("cargo::rustc-cfg=has_kubernetes_validate");
    }
}
