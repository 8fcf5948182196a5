//! `tollgate run`: reads the operations, runs them through the harness and
//! prints the outputs.

use std::fs;
use std::io::{self, Read, Write};
use std::path::Path;

use anyhow::Context;
use tollgate_core::{Harness, LimiterConfig};

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

/// Reads and validates a limiter configuration file.
pub(crate) fn load_config(path: &Path) -> anyhow::Result<LimiterConfig> {
    let text = fs::read_to_string(path)
        .with_context(|| format!("cannot read the config file {}", path.display()))?;
    LimiterConfig::from_toml_str(&text).with_context(|| format!("in {}", path.display()))
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
