//! `tollgate`: the rate limiter's command line.
//!
//! - `tollgate run FILE|-`: the operations harness (see `tests/conformance/CONTRACT.md`).

mod cli;
mod run;

use std::process::ExitCode;

use clap::Parser;

use cli::{Cli, Command};

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run(arguments) => run::run(&arguments),
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
