//! `tollgate serve`: logging, the configuration file, the async runtime.

use std::io::IsTerminal;

use anyhow::Context;
use tollgate_gateway::{ServeConfig, ServeOptions};
use tracing_subscriber::EnvFilter;

use crate::cli::{LogFormat, ServeArguments};

/// Runs the gateway until SIGTERM or Ctrl-C.
pub(crate) fn serve(arguments: &ServeArguments) -> anyhow::Result<()> {
    init_logs(arguments.log_format);
    let config = match &arguments.config {
        Some(path) => ServeConfig::from_file(path)?,
        None => ServeConfig::builtin(),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let mut options = ServeOptions::new(config, arguments.config.clone());
    options.store_url.clone_from(&arguments.store);
    let result = runtime.block_on(tollgate_gateway::run(options));
    // What a drain timeout or a second signal cut off is not waited for.
    runtime.shutdown_background();
    Ok(result?)
}

fn init_logs(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        // The Redis client logs every failed reconnection attempt; tollgate
        // logs a store failure itself, at most once a second.
        EnvFilter::new("info,redis=error")
    });
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}
