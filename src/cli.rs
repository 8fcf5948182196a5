//! The command line, declared with clap.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// tollgate: an exact, fast rate limiter for API gateways.
#[derive(Debug, Parser)]
#[command(name = "tollgate", version, about)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Apply a JSON array of operations to a fresh gateway and print the JSON
    /// array of outputs (one per operation).
    Run(RunArguments),
}

#[derive(Debug, Args)]
pub(crate) struct RunArguments {
    /// The operations file; `-` reads standard input.
    #[arg(value_name = "FILE|-")]
    pub(crate) input: PathBuf,
    /// A TOML file of limiter settings (default policy, tiers, exempt keys,
    /// eviction, key cap); the built-in defaults when absent.
    #[arg(long, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
}
