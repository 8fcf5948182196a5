//! `tollgate check-config FILE`: the gateway's configuration checked without
//! starting, as `nginx -t`: what it would put in force, and every warning;
//! the certificate files it names are read and checked, as a start would.

use anyhow::Context;
use tollgate_gateway::ServeConfig;

use crate::cli::CheckConfigArguments;

/// Prints the summary and the warnings of `arguments.config` on stdout;
/// an error (the file's, with its setting) when it is invalid.
pub(crate) fn check(arguments: &CheckConfigArguments) -> anyhow::Result<()> {
    let mut config = ServeConfig::from_file(arguments.config())?;
    config.override_store_url(arguments.store.as_deref());
    tollgate_gateway::check_store_url(&config, Some(arguments.config()))?;
    let known_keys = tollgate_gateway::check_files(&config)?;
    let (known_keys_line, known_keys_warning) = match &known_keys {
        Some(known) => {
            let (line, warning) =
                tollgate_gateway::config::known_keys_report(known, config.keys.unknown);
            (Some(line), warning)
        }
        None => (None, None),
    };
    // With Redis, the policy Redis shares wins over the file's: say which.
    let in_force = match config.store.url {
        Some(_) => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("cannot start the async runtime")?
            .block_on(tollgate_gateway::default_policy_in_force(&config)),
        None => None,
    };
    let mut report = String::new();
    for line in config
        .summary()
        .into_iter()
        .chain(known_keys_line)
        .chain(in_force)
    {
        report.push_str(&line);
        report.push('\n');
    }
    for warning in config
        .start_warnings()
        .into_iter()
        .chain(known_keys_warning)
    {
        report.push_str("warning: ");
        report.push_str(&warning);
        report.push('\n');
    }
    report.push_str(&format!(
        "{}: the configuration is valid\n",
        arguments.config().display()
    ));
    use std::io::Write;
    std::io::stdout()
        .lock()
        .write_all(report.as_bytes())
        .context("cannot write the report")
}
