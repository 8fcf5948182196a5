// The build script of every crate with Redis tests (`include!`d by each
// crate's build.rs): the cfg `has_redis` when `REDIS_URL` is set (not empty),
// `has_redis_cluster` when `REDIS_CLUSTER_URL` is, and both under `CI=true`
// whatever the variables say, so that there a missing peer fails its tests
// instead of leaving them out.

fn main() {
    println!("cargo::rustc-check-cfg=cfg(has_redis)");
    println!("cargo::rustc-check-cfg=cfg(has_redis_cluster)");
    for variable in ["REDIS_URL", "REDIS_CLUSTER_URL", "CI"] {
        println!("cargo::rerun-if-env-changed={variable}");
    }
    let set = |variable: &str| std::env::var(variable).is_ok_and(|value| !value.is_empty());
    let in_ci = std::env::var("CI").is_ok_and(|value| value == "true");
    if in_ci || set("REDIS_URL") {
        println!("cargo::rustc-cfg=has_redis");
    }
    if in_ci || set("REDIS_CLUSTER_URL") {
        println!("cargo::rustc-cfg=has_redis_cluster");
    }
}
