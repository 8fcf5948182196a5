//! `tollgate replay`: reads the configurations and the logs, runs them in
//! `tollgate-replay`, and writes the table, the JSON or the picture.

use std::io::{BufReader, Write};
use std::path::Path;

use anyhow::{Context, bail};
use tollgate_core::Fingerprinter;
use tollgate_gateway::config::ServeConfig;
use tollgate_replay::{
    Candidate, Format, MOST_GROUPS, NginxKey, Options, PlotBy, Replayer, Source, plot_panels,
    replay as run, table,
};
use tollgate_simulate::plot::{self, Axes, Panel};

use crate::cli::ReplayArguments;

/// Replays the logs `arguments` name and writes what it found.
pub(crate) fn replay(arguments: &ReplayArguments) -> anyhow::Result<()> {
    let format = match arguments.log_format.as_str() {
        "tollgate" => {
            if arguments.key_field.is_some() {
                bail!("--key-field applies to nginx and envoy logs: tollgate's log names its key");
            }
            Format::Tollgate
        }
        "nginx" => Format::Nginx(
            NginxKey::parse(arguments.key_field.as_deref().unwrap_or("remote_user"))
                .map_err(anyhow::Error::msg)?,
        ),
        "envoy" => Format::Envoy {
            key_field: arguments
                .key_field
                .clone()
                .unwrap_or_else(|| "api_key".to_owned()),
        },
        other => bail!("--log-format {other:?}: expected tollgate, nginx or envoy"),
    };
    if !["table", "json"].contains(&arguments.format.as_str()) {
        bail!("--format {:?}: expected table or json", arguments.format);
    }
    let mut candidates = vec![candidate(&arguments.config)?];
    if let Some(other) = &arguments.compare {
        candidates.push(candidate(other)?);
    }
    let mut sources = Vec::new();
    for path in &arguments.logs {
        let reader: Box<dyn std::io::BufRead> = if path == Path::new("-") {
            Box::new(BufReader::new(std::io::stdin()))
        } else {
            let file = std::fs::File::open(path)
                .with_context(|| format!("{}: cannot read it", path.display()))?;
            Box::new(BufReader::with_capacity(1 << 16, file))
        };
        sources.push(Source {
            name: path.display().to_string(),
            reader,
        });
    }
    let window = humantime::parse_duration(&arguments.window)
        .ok()
        .and_then(|window| u64::try_from(window.as_nanos()).ok())
        .with_context(|| format!("--window {:?}: expected a span, as 60s", arguments.window))?;
    let options = Options {
        window,
        most: usize::from(arguments.top),
    };
    let report = run(sources, &format, &candidates, options);
    if report.lines > 0 && report.bad_lines == report.lines {
        bail!(
            "none of the {} lines could be read as --log-format {} (the first: {}): is it the \
             right format?",
            report.lines,
            arguments.log_format,
            report.bad_examples.first().map_or("", String::as_str)
        );
    }
    if let Some(path) = &arguments.plot {
        let by = match arguments.plot_by.as_str() {
            "tier" => PlotBy::Tier,
            "route" => PlotBy::Route,
            _ => PlotBy::Overall,
        };
        let plotted = plot_panels(&report, by);
        let step_ms = plotted.step_ms;
        let panels: Vec<Panel<'_>> = plotted
            .panels
            .iter()
            .map(|panel| Panel {
                title: &panel.title,
                buckets: &panel.buckets,
                remaining: false,
            })
            .collect();
        let title = match (by, plotted.groups_left_out) {
            (PlotBy::Overall, _) | (_, 0) => "requests allowed and refused over time".to_owned(),
            (_, left_out) => format!(
                "requests allowed and refused over time ({MOST_GROUPS} most refused shown, \
                 {left_out} more left out)"
            ),
        };
        let title = title.as_str();
        let per = if step_ms == 60_000 {
            "requests per minute".to_owned()
        } else {
            format!("requests per {} minutes", step_ms / 60_000)
        };
        let axes = Axes {
            unit_ms: 60_000,
            time: "minutes from the first",
            requests: &per,
        };
        match path.extension().and_then(|extension| extension.to_str()) {
            Some("png") => plot::png_on(title, &panels, step_ms, path, axes)?,
            Some("svg") => std::fs::write(path, plot::svg_on(title, &panels, step_ms, axes)?)
                .with_context(|| format!("--plot {}: cannot write it", path.display()))?,
            _ => bail!(
                "--plot {}: the file's name ends in .svg or .png",
                path.display()
            ),
        }
    }
    let text = if arguments.format == "json" {
        let mut text = serde_json::to_string_pretty(&report)?;
        text.push('\n');
        text
    } else {
        table(&report)
    };
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(())
}

/// The configuration at `path`, ready to replay.
fn candidate(path: &Path) -> anyhow::Result<Candidate> {
    let config = ServeConfig::from_file(path)?;
    let secret = config.store.key_secret();
    let fingerprints = Fingerprinter::new(secret.as_deref().map(str::as_bytes));
    let replayer =
        Replayer::new(&config, &fingerprints).with_context(|| format!("{}", path.display()))?;
    Ok(Candidate {
        name: path.display().to_string(),
        replayer,
        fingerprints,
    })
}
