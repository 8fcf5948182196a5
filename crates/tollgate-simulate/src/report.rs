//! A simulation's numbers as `--format json` gives them, and the panels of
//! its picture.

use serde::Serialize;

use crate::plot::Panel;
use crate::run::Run;

/// What `tollgate simulate` found: the pattern, the step, and each
/// policy's run.
#[derive(Debug, Serialize)]
pub struct Report<'a> {
    /// The pattern as given.
    pub pattern: &'a str,
    /// Requests the pattern made.
    pub requests: u64,
    /// The run's length, in milliseconds.
    pub duration_ms: u64,
    /// Each step's length, in milliseconds.
    pub step_ms: u64,
    /// Each policy's run, in the order given.
    pub runs: &'a [Run],
}

impl Report<'_> {
    /// The titles of the picture's panels, one per run: the policy's name
    /// and its totals.
    pub fn titles(&self) -> Vec<String> {
        self.runs
            .iter()
            .map(|run| {
                format!(
                    "{}: {} allowed, {} refused of {}",
                    run.name, run.allowed, run.refused, self.requests
                )
            })
            .collect()
    }

    /// The panels of the picture, titled by `titles` ([`Report::titles`]).
    pub fn panels<'b>(&'b self, titles: &'b [String]) -> Vec<Panel<'b>> {
        self.runs
            .iter()
            .zip(titles)
            .map(|(run, title)| Panel {
                title,
                buckets: &run.buckets,
                remaining: true,
            })
            .collect()
    }
}
