//! `tollgate`: the rate limiter's command line.
//!
//! - `tollgate run FILE|-`: the operations harness (see `tests/conformance/CONTRACT.md`).
//! - `tollgate serve [--config FILE]`: the gateway (see `docs/CONFIG.md`).
//! - `tollgate rls [flags]`: Envoy's rate limit service; `tollgate rls run
//!   --config DIR FILE|-` drives it with a JSON array of steps.
//! - `tollgate rlqs [flags]`: Envoy's rate limit quota service (see
//!   `docs/RLQS.md`).
//! - `tollgate simulate --policy P --pattern T`: policies against a traffic
//!   pattern, offline (see `docs/SIMULATE.md`).
//! - `tollgate replay --config FILE LOG...`: access logs through a
//!   configuration, offline (see `docs/REPLAY.md`).

mod check_config;
mod cli;
mod replay_command;
mod rlqs_command;
mod rls_command;
mod run;
mod serve_command;
mod simulate_command;

use std::process::ExitCode;

use clap::Parser;

use cli::{Cli, Command};

/// mimalloc: the gateway allocates and frees small buffers on every request
/// (headers, bodies, futures); glibc's allocator was a seventh of its CPU.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run(arguments) => run::run(&arguments),
        Command::Serve(arguments) => serve_command::serve(&arguments),
        Command::Rls(command) => rls_command::rls(*command),
        Command::Rlqs(arguments) => rlqs_command::rlqs(*arguments),
        Command::CheckConfig(arguments) => check_config::check(&arguments),
        Command::Simulate(arguments) => simulate_command::simulate(&arguments),
        Command::Replay(arguments) => replay_command::replay(&arguments),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            // One line: the whole chain of causes, joined.
            eprintln!("tollgate: {error:#}");
            ExitCode::from(2)
        }
    }
}
