//! What a configuration would have done to real traffic (`tollgate
//! replay`): access logs read in one of three [`Format`]s, put back in time
//! order, and replayed through each configuration's plans, routes and
//! budgets by a [`Replayer`] (tollgate's own engine, on each request's
//! time); the [`Report`] as numbers ([`table`], or JSON) and a picture of
//! the refusals over time, per configuration, tier or route
//! ([`plot_panels`]).

pub mod formats;
mod line;
mod plot;
mod replayer;
mod run;
mod table;
mod tally;

pub use formats::{Format, NginxKey};
pub use line::{LogLine, Logged};
pub use plot::{MOST_GROUPS, PlotBy, PlotPanel, Plotted, plot_panels};
pub use replayer::{Replayed, Replayer, SetupError, Skip};
pub use run::{
    Agreement, Candidate, ConfigReport, Options, REORDER_WINDOW, Report, Source, replay,
};
pub use table::table;
pub use tally::{Figures, RefusedKey};
