//! `tollgate rls`: logging, the async runtime, and the rate limit service
//! (`tollgate_rls::serve`); `tollgate rls run`: the steps harness.

use std::io::{IsTerminal, Read, Write};

use anyhow::Context;
use tollgate_rls::settings::LogFormat;
use tollgate_rls::{ConfigSource, LoaderOptions, RlsArguments};
use tracing_subscriber::EnvFilter;

use crate::cli::{RlsCommand, RlsRunArguments, RlsSubcommand};

/// Runs the subcommand: the harness for `run`, else the service until a
/// signal.
pub(crate) fn rls(command: RlsCommand) -> anyhow::Result<()> {
    match command.command {
        Some(RlsSubcommand::Run(run)) => run_steps(&command.arguments, &run),
        None => serve(command.arguments),
    }
}

fn serve(arguments: RlsArguments) -> anyhow::Result<()> {
    init_logs(&arguments)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let result = runtime.block_on(tollgate_rls::serve(arguments));
    runtime.shutdown_background();
    Ok(result?)
}

/// `LOG_LEVEL` and `LOG_FORMAT`; `RUST_LOG`, when set, wins over the level.
pub(crate) fn init_logs(arguments: &RlsArguments) -> anyhow::Result<()> {
    let level = arguments.log_filter()?;
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new(format!("{level},redis=error")));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    match arguments.log_format() {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
    Ok(())
}

fn run_steps(arguments: &RlsArguments, run: &RlsRunArguments) -> anyhow::Result<()> {
    let loader = LoaderOptions {
        merge_domains: arguments.merge_domain_config,
        extensions: arguments.config_extensions,
    };
    let files = match run.config.as_ref().or(arguments.config.as_ref()) {
        Some(directory) => {
            let read = ConfigSource::directory(directory, loader).read()?;
            for skipped in &read.skipped {
                eprintln!("tollgate: skipped {skipped}");
            }
            read.files
                .into_iter()
                .map(|file| {
                    let name = file
                        .name
                        .strip_prefix("config.")
                        .unwrap_or(&file.name)
                        .to_owned();
                    (name, file.content)
                })
                .collect()
        }
        None => Vec::new(),
    };
    let mut input = Vec::new();
    if run.input.as_os_str() == "-" {
        std::io::stdin()
            .read_to_end(&mut input)
            .context("cannot read standard input")?;
    } else {
        input = std::fs::read(&run.input)
            .with_context(|| format!("cannot read {}", run.input.display()))?;
    }
    let output = tollgate_rls::harness::run(files, arguments.service_settings(), loader, &input)?;
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(&output)
        .context("cannot write the output")?;
    stdout.write_all(b"\n").context("cannot write the output")?;
    Ok(())
}
