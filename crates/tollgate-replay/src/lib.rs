//! What a configuration would have done to real traffic (`tollgate
//! replay`): access logs read in one of three [`Format`]s, put back in time
//! order, and replayed through each configuration's plans, routes and
//! budgets by a [`Replayer`] (tollgate's own engine, on each request's
//! time); the [`Report`] as numbers ([`table`], or JSON) and a picture of
//! the refusals over time ([`plot_panels`]).

pub mod formats;
mod line;
mod replayer;
mod run;
mod table;
mod tally;

pub use formats::{Format, NginxKey};
pub use line::{LogLine, Logged};
pub use replayer::{Replayed, Replayer, SetupError, Skip};
pub use run::{
    Agreement, Candidate, ConfigReport, Options, REORDER_WINDOW, Report, Source, replay,
};
pub use table::table;
pub use tally::{Figures, RefusedKey};

use tollgate_simulate::Bucket;

/// The most points of a replay's picture: longer replays add minutes up.
const MOST_POINTS: u64 = 2000;

/// Each configuration's requests allowed and refused over time, as steps
/// of whole minutes from the first minute of any, for
/// [`tollgate_simulate::plot`]: the buckets of each, and the step in
/// milliseconds.
pub fn plot_panels(report: &Report) -> (Vec<Vec<Bucket>>, u64) {
    let minutes = report
        .configs
        .iter()
        .flat_map(|config| config.per_minute.iter().map(|(minute, _, _)| *minute));
    let (first, last) = minutes.fold((u64::MAX, 0), |(first, last), minute| {
        (first.min(minute), last.max(minute))
    });
    if first > last {
        return (report.configs.iter().map(|_| Vec::new()).collect(), 60_000);
    }
    let span = last - first + 1;
    let per_point = span.div_ceil(MOST_POINTS).max(1);
    let points = span.div_ceil(per_point);
    let panels = report
        .configs
        .iter()
        .map(|config| {
            let mut buckets: Vec<Bucket> = (0..points)
                .map(|index| Bucket {
                    start_ms: index * per_point * 60_000,
                    allowed: 0,
                    refused: 0,
                    remaining: 0,
                })
                .collect();
            for (minute, allowed, refused) in &config.per_minute {
                let index = usize::try_from((minute - first) / per_point).unwrap_or(0);
                if let Some(bucket) = buckets.get_mut(index) {
                    bucket.allowed += allowed;
                    bucket.refused += refused;
                }
            }
            buckets
        })
        .collect();
    (panels, per_point * 60_000)
}
