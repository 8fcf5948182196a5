//! `tollgate run`: reads the operations, runs them through the harness and
//! prints the outputs.

use std::fs;
use std::io::{self, Read, Write};
use std::path::Path;

use anyhow::Context;
use tollgate_core::{Harness, LimiterConfig};
use tollgate_gateway::ServeConfig;

use crate::cli::RunArguments;

/// Runs the operations of `arguments.input` and prints the outputs on stdout.
/// Nothing is printed on stdout unless the whole input is a JSON array.
pub(crate) fn run(arguments: &RunArguments) -> anyhow::Result<()> {
    let config = match &arguments.config {
        Some(path) => load_config(path)?,
        None => LimiterConfig::default(),
    };
    let input = read_input(&arguments.input)?;
    let mut harness = Harness::new(&config)?;
    let mut output = Vec::with_capacity(input.len() / 2);
    harness.run(&input, &mut output)?;
    let mut stdout = io::stdout().lock();
    stdout
        .write_all(&output)
        .and_then(|()| stdout.flush())
        .context("cannot write the output")
}

/// Reads and validates a configuration file, and prints on stderr a warning
/// for each setting written in the old layout.
fn load_config(path: &Path) -> anyhow::Result<LimiterConfig> {
    let (limits, warnings) = read_config(path)?;
    for warning in warnings {
        eprintln!("tollgate: warning: {}: {warning}", path.display());
    }
    Ok(limits)
}

/// The limits of a configuration file in the gateway's layout (a whole
/// `gateway.toml` will do: all of it is checked, its `[limits]` used), and
/// the warnings about settings written in the old layout of this command's
/// files (at the top level, not in `[limits]`).
fn read_config(path: &Path) -> anyhow::Result<(LimiterConfig, Vec<String>)> {
    let config = ServeConfig::from_file(path)?;
    let warnings = config.layout_warnings();
    Ok((config.limits, warnings))
}

fn read_input(path: &Path) -> anyhow::Result<Vec<u8>> {
    if path.as_os_str() == "-" {
        let mut input = Vec::new();
        io::stdin()
            .lock()
            .read_to_end(&mut input)
            .context("cannot read standard input")?;
        Ok(input)
    } else {
        fs::read(path).with_context(|| format!("cannot read {}", path.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;
    use tollgate_core::Policy;

    fn example(name: &str) -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("examples")
            .join(name)
    }

    #[test]
    fn the_example_limits_are_in_the_gateways_layout() {
        let (limits, warnings) = read_config(&example("limits.toml")).unwrap();
        assert_eq!(warnings, Vec::<String>::new());
        assert_eq!(
            limits.default_policy,
            Policy::token_bucket(60, 60, 10).unwrap()
        );
        assert_eq!(limits.tiers["pro"], Policy::sliding_log(20, 60).unwrap());
        assert_eq!(
            limits.tiers["enterprise"],
            Policy::fixed_window(1000, 60).unwrap()
        );
        assert_eq!(limits.exempt_keys, ["sk_internal"]);
        assert_eq!(limits.idle_eviction_s, 3600);
        assert_eq!(limits.max_tracked_keys, 1_000_000);
    }

    #[test]
    fn a_whole_gateway_file_gives_its_limits() {
        let (limits, warnings) = read_config(&example("gateway.toml")).unwrap();
        assert_eq!(warnings, Vec::<String>::new());
        assert_eq!(
            limits.default_policy,
            Policy::fixed_window(100, 60).unwrap()
        );
        assert_eq!(
            limits.tiers["enterprise"],
            Policy::token_bucket(6000, 60, 500).unwrap()
        );
    }
}
