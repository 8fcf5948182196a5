//! A replay's report as text (`--format table`): per configuration, the
//! requests and would-be refusals per tier and per route, their peak rates,
//! the keys most often refused; configurations side by side with
//! `--compare`.

use std::fmt::Write;

use crate::run::Report;
use crate::tally::Figures;

/// `report` as text tables.
pub fn table(report: &Report) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} lines read, {} bad, {} out of order beyond the window",
        report.lines, report.bad_lines, report.out_of_order
    );
    for example in &report.bad_examples {
        let _ = writeln!(out, "  bad line {example}");
    }
    let names: Vec<&str> = report
        .configs
        .iter()
        .map(|config| config.config.as_str())
        .collect();
    let _ = writeln!(out);
    let header = |out: &mut String, what: &str| {
        let _ = write!(out, "{what:<24}");
        for name in &names {
            let short: String = name
                .chars()
                .rev()
                .take(40)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            let _ = write!(out, " | {short:>40}");
        }
        let _ = writeln!(out);
        let _ = write!(out, "{:<24}", "");
        for _ in &names {
            let _ = write!(
                out,
                " | {:>9} {:>9} {:>7} {:>6} {:>6}",
                "requests", "refused", "share", "peak/s", "peak/m"
            );
        }
        let _ = writeln!(out);
    };
    let row = |out: &mut String, label: &str, figures: &[Option<&Figures>]| {
        let label: String = label.chars().take(24).collect();
        let _ = write!(out, "{label:<24}");
        for figures in figures {
            match figures {
                Some(f) => {
                    let _ = write!(
                        out,
                        " | {:>9} {:>9} {:>6.2}% {:>6} {:>6}",
                        f.requests,
                        f.refused,
                        f.refused_percent,
                        f.peak_per_second,
                        f.peak_per_minute
                    );
                }
                None => {
                    let _ = write!(
                        out,
                        " | {:>9} {:>9} {:>7} {:>6} {:>6}",
                        "-", "-", "-", "-", "-"
                    );
                }
            }
        }
        let _ = writeln!(out);
    };
    header(&mut out, "all requests");
    row(
        &mut out,
        "all",
        &report
            .configs
            .iter()
            .map(|config| Some(&config.overall))
            .collect::<Vec<_>>(),
    );
    let _ = writeln!(out);
    for (title, pick) in [("by tier", 0_u8), ("by route", 1_u8)] {
        header(&mut out, title);
        let mut labels: Vec<&String> = report
            .configs
            .iter()
            .flat_map(|config| {
                if pick == 0 {
                    config.tiers.keys()
                } else {
                    config.routes.keys()
                }
            })
            .collect();
        labels.sort();
        labels.dedup();
        for label in labels {
            let figures: Vec<Option<&Figures>> = report
                .configs
                .iter()
                .map(|config| {
                    if pick == 0 {
                        config.tiers.get(label)
                    } else {
                        config.routes.get(label)
                    }
                })
                .collect();
            row(&mut out, label, &figures);
        }
        let _ = writeln!(out);
    }
    for config in &report.configs {
        let _ = writeln!(out, "{}:", config.config);
        let _ = writeln!(out, "  exempt requests: {}", config.exempt);
        for (reason, count) in &config.skipped {
            let _ = writeln!(
                out,
                "  not replayed, {}: {count}",
                crate::replayer::Skip::describe(reason)
            );
        }
        if let Some(agreement) = &config.agreement {
            let _ = writeln!(
                out,
                "  decisions as logged: {} of {}{}",
                agreement.agreed,
                agreement.compared,
                if agreement.disagreements.is_empty() {
                    String::new()
                } else {
                    format!(" (first differing: {})", agreement.disagreements.join(", "))
                }
            );
        }
        let _ = writeln!(out, "  keys most often refused:");
        if config.overall.most_refused.is_empty() {
            let _ = writeln!(out, "    none");
        }
        for key in &config.overall.most_refused {
            let _ = writeln!(
                out,
                "    {} {:>9}{}",
                key.key,
                key.refused,
                if key.error > 0 {
                    format!(" (at most {} too many)", key.error)
                } else {
                    String::new()
                }
            );
        }
    }
    out
}
