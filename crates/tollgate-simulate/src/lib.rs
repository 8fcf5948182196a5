//! What a limit does to a traffic pattern, before it ships (`tollgate
//! simulate`): traffic [`Pattern`]s and their [`Arrivals`], a [`Run`] of
//! each policy over them decided by tollgate's own engine on a manual clock
//! ([`simulate`]), their [`Report`] as numbers (JSON) and their picture
//! ([`plot`]: SVG or PNG).
//!
//! ```
//! use std::time::Duration;
//! use tollgate_simulate::{Pattern, parse_policy, simulate};
//!
//! // 10 requests a second for 3 s against 5 a second.
//! let policy = parse_policy("fixed_window:5/1s").unwrap();
//! let pattern = Pattern::parse("steady:10/s").unwrap();
//! let arrivals = pattern.arrivals(Duration::from_secs(3), Duration::from_secs(1)).unwrap();
//! let runs = simulate(&[policy], &arrivals, Duration::from_secs(1)).unwrap();
//! assert_eq!((runs[0].allowed, runs[0].refused), (15, 15));
//! ```

mod pattern;
pub mod plot;
mod policy_spec;
mod report;
mod run;

pub use pattern::{Arrivals, MAX_ARRIVALS, Pattern, PatternError};
pub use policy_spec::parse_policy;
pub use report::Report;
pub use run::{Bucket, MAX_STEPS, NamedPolicy, Run, RunError, simulate};
