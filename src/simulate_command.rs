//! `tollgate simulate`: reads the policies and the pattern, runs them in
//! `tollgate-simulate`, and writes the numbers or the picture.

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, bail};
use tollgate_simulate::{Pattern, Report, parse_policy, plot, simulate as run};

use crate::cli::SimulateArguments;

/// What `--format` (or `--output`'s extension) asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    Json,
    Svg,
    Png,
}

/// Runs the simulation `arguments` describe and writes its result.
pub(crate) fn simulate(arguments: &SimulateArguments) -> anyhow::Result<()> {
    let policies = arguments
        .policies
        .iter()
        .map(|text| parse_policy(text).map_err(anyhow::Error::msg))
        .collect::<anyhow::Result<Vec<_>>>()?;
    for (index, policy) in policies.iter().enumerate() {
        if policies[..index]
            .iter()
            .any(|earlier| earlier.name == policy.name)
        {
            bail!(
                "--policy {}: two policies of that name; name each as NAME=...",
                policy.name
            );
        }
    }
    let format = format(arguments)?;
    let given_duration = arguments
        .duration
        .as_deref()
        .map(|text| span("--duration", text))
        .transpose()?;
    let pattern = match arguments.pattern.strip_prefix("file:") {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("--pattern file {path}: cannot read it"))?;
            Pattern::timestamps(&text).with_context(|| format!("--pattern file {path}"))?
        }
        None => Pattern::parse(&arguments.pattern)?,
    };
    // A file runs from its first timestamp to past its last unless a
    // duration is given; a generated pattern 60 s.
    let duration = match (&pattern, given_duration) {
        (_, Some(duration)) => duration,
        (Pattern::Timestamps(_), None) => Duration::ZERO,
        (_, None) => Duration::from_secs(60),
    };
    let step = match &arguments.step {
        Some(text) => span("--step", text)?,
        None if !duration.is_zero() => default_step(duration),
        None => Duration::from_secs(1),
    };
    let arrivals = pattern.arrivals(duration, step)?;
    let runs = run(&policies, &arrivals, step)?;
    let span_ns = arrivals.end.saturating_sub(arrivals.start);
    let report = Report {
        pattern: &arguments.pattern,
        requests: arrivals.times.len() as u64,
        duration_ms: span_ns / 1_000_000,
        step_ms: u64::try_from(step.as_millis()).unwrap_or(u64::MAX),
        runs: &runs,
    };
    match format {
        Format::Json => {
            let mut text = serde_json::to_string_pretty(&report)?;
            text.push('\n');
            write(arguments.output.as_deref(), text.as_bytes())
        }
        Format::Svg => {
            let titles = report.titles();
            let svg = plot::svg(&title(arguments), &report.panels(&titles), report.step_ms)?;
            write(arguments.output.as_deref(), svg.as_bytes())
        }
        Format::Png => {
            let Some(path) = arguments.output.as_deref() else {
                bail!("--format png writes a file: give --output FILE");
            };
            let titles = report.titles();
            plot::png(
                &title(arguments),
                &report.panels(&titles),
                report.step_ms,
                path,
            )?;
            Ok(())
        }
    }
}

fn format(arguments: &SimulateArguments) -> anyhow::Result<Format> {
    let (named, from_output) = match arguments.format.as_deref() {
        Some(format) => (Some(format), false),
        None => (
            arguments
                .output
                .as_deref()
                .and_then(Path::extension)
                .and_then(|extension| extension.to_str()),
            true,
        ),
    };
    match named {
        None | Some("json") => Ok(Format::Json),
        Some("svg") => Ok(Format::Svg),
        Some("png") => Ok(Format::Png),
        Some(other) if from_output => bail!(
            "--output's extension .{other} is not a format: end it in .json, .svg or .png, or \
             give --format"
        ),
        Some(other) => bail!("--format {other:?}: expected json, svg or png"),
    }
}

fn span(flag: &str, text: &str) -> anyhow::Result<Duration> {
    match humantime::parse_duration(text) {
        Ok(span) if !span.is_zero() => Ok(span),
        _ => bail!("{flag} {text:?}: expected a span above zero, as 60s, 10m or 500ms"),
    }
}

/// A hundredth of the run, in whole milliseconds (at least 1 ms).
fn default_step(duration: Duration) -> Duration {
    let millis = (duration.as_millis() / 100).max(1);
    Duration::from_millis(u64::try_from(millis).unwrap_or(u64::MAX))
}

fn title(arguments: &SimulateArguments) -> String {
    match &arguments.duration {
        Some(duration) => format!("{} over {duration}", arguments.pattern),
        None => arguments.pattern.clone(),
    }
}

fn write(path: Option<&Path>, bytes: &[u8]) -> anyhow::Result<()> {
    match path {
        Some(path) => std::fs::write(path, bytes)
            .with_context(|| format!("--output {}: cannot write it", path.display())),
        None => {
            let mut out = std::io::stdout().lock();
            out.write_all(bytes)?;
            out.flush()?;
            Ok(())
        }
    }
}
