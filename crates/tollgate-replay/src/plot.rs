//! What a replay's picture shows ([`plot_panels`]): requests allowed and
//! refused over time, one panel per configuration for all its requests, or
//! per tier or per route with each configuration's in turn, stacked on one
//! time axis of whole minutes. Drawn by [`tollgate_simulate::plot`].

use std::collections::BTreeMap;

use tollgate_simulate::Bucket;

use crate::{ConfigReport, Figures, Report};

/// The most points of a replay's picture: longer replays add minutes up.
const MOST_POINTS: u64 = 2000;

/// The most tiers or routes drawn (those with the most refusals, over every
/// configuration): a picture of more is too tall to read.
pub const MOST_GROUPS: usize = 12;

/// What a replay's picture has a panel for (`--plot-by`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlotBy {
    /// Each configuration's requests, all together.
    Overall,
    /// Each tier (`keyless` for requests without an API key), each
    /// configuration's in turn.
    Tier,
    /// Each route, likewise.
    Route,
}

/// One panel: its title (the configuration, the group, and its refusals)
/// and its steps.
#[derive(Debug, PartialEq)]
pub struct PlotPanel {
    /// As `base: 1 of 3 refused (33.33%)` or `base, route orders: ...`.
    pub title: String,
    /// Requests allowed and refused per step, from the first minute of any
    /// panel.
    pub buckets: Vec<Bucket>,
}

/// A replay's picture, ready to draw.
#[derive(Debug, PartialEq)]
pub struct Plotted {
    /// The panels, in order: per group, each configuration's in turn.
    pub panels: Vec<PlotPanel>,
    /// Each step's length in milliseconds: whole minutes, more than one
    /// when the replay spans more than 2,000 minutes.
    pub step_ms: u64,
    /// Tiers or routes not drawn (past [`MOST_GROUPS`]).
    pub groups_left_out: usize,
}

/// The panels of `report`'s picture, one per configuration (`by` is
/// [`PlotBy::Overall`]) or per tier or route and configuration.
pub fn plot_panels(report: &Report, by: PlotBy) -> Plotted {
    let mut groups_left_out = 0;
    let mut chosen: Vec<(String, &Figures)> = Vec::new();
    match by {
        PlotBy::Overall => {
            for config in &report.configs {
                chosen.push((config.config.clone(), &config.overall));
            }
        }
        PlotBy::Tier | PlotBy::Route => {
            type Groups = fn(&ConfigReport) -> &BTreeMap<String, Figures>;
            let (kind, groups): (&str, Groups) = match by {
                PlotBy::Tier => ("tier", |config| &config.tiers),
                _ => ("route", |config| &config.routes),
            };
            // Every group of any configuration, the most refused first.
            let mut names: Vec<(u64, &String)> = Vec::new();
            for config in &report.configs {
                for name in groups(config).keys() {
                    if !names.iter().any(|(_, seen)| *seen == name) {
                        let refused = report
                            .configs
                            .iter()
                            .filter_map(|config| groups(config).get(name))
                            .map(|figures| figures.refused)
                            .sum();
                        names.push((refused, name));
                    }
                }
            }
            names.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(b.1)));
            groups_left_out = names.len().saturating_sub(MOST_GROUPS);
            for (_, name) in names.into_iter().take(MOST_GROUPS) {
                for config in &report.configs {
                    if let Some(figures) = groups(config).get(name) {
                        chosen.push((format!("{}, {kind} {name}", config.config), figures));
                    }
                }
            }
        }
    }
    let minutes = chosen
        .iter()
        .flat_map(|(_, figures)| figures.per_minute.iter().map(|(minute, _, _)| *minute));
    let (first, last) = minutes.fold((u64::MAX, 0), |(first, last), minute| {
        (first.min(minute), last.max(minute))
    });
    let (first, span) = if first > last {
        (0, 0)
    } else {
        (first, last - first + 1)
    };
    let per_point = span.div_ceil(MOST_POINTS).max(1);
    let points = span.div_ceil(per_point);
    let panels = chosen
        .into_iter()
        .map(|(name, figures)| {
            let mut buckets: Vec<Bucket> = (0..points)
                .map(|index| Bucket {
                    start_ms: index * per_point * 60_000,
                    allowed: 0,
                    refused: 0,
                    remaining: 0,
                })
                .collect();
            for (minute, allowed, refused) in &figures.per_minute {
                let index = usize::try_from((minute - first) / per_point).unwrap_or(0);
                if let Some(bucket) = buckets.get_mut(index) {
                    bucket.allowed += allowed;
                    bucket.refused += refused;
                }
            }
            PlotPanel {
                title: format!(
                    "{name}: {} of {} refused ({:.2}%)",
                    figures.refused, figures.requests, figures.refused_percent
                ),
                buckets,
            }
        })
        .collect();
    Plotted {
        panels,
        step_ms: per_point * 60_000,
        groups_left_out,
    }
}
