// Included by the build scripts of the crates whose tests run Envoy
// (`tollgate-rls`, `tollgate-rlqs`): sets `has_envoy` when `ENVOY` is set
// (not empty) or a file named `envoy` is in a directory of the `PATH`, and
// always under `CI=true` (there a missing Envoy fails the Envoy tests).
// Reruns when `ENVOY`, `PATH` or `CI` changes.

/// Prints the `has_envoy` cfg and its rerun conditions.
pub(crate) fn main() {
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
