//! `tollgate rlqs`'s settings: those of `tollgate rls` where they apply
//! (the same flags and environment variables: `--config` or `RUNTIME_*`,
//! the listeners, Redis, logs), and the quota service's own, each with a
//! `TOLLGATE_RLQS_*` environment variable.

use std::time::Duration;

use clap::{Args, CommandFactory, FromArgMatches, Parser, ValueEnum};
use tollgate_core::QuotaAssignment;
use tollgate_rls::RlsArguments;
use tollgate_rls::settings::positive_go_duration;

use crate::allocator::AllocatorSettings;

/// `tollgate rlqs`'s flags.
#[derive(Clone, Debug, Args)]
pub struct RlqsArguments {
    /// The settings shared with `tollgate rls`.
    #[command(flatten)]
    pub rls: RlsArguments,

    /// Each assignment's time to live (whole seconds, at least 6: Envoy 1.40
    /// reports every 5 s and cuts the TTL to whole seconds). An assignment
    /// is renewed with every answer; one the server stops renewing ends
    /// after this, and Envoy applies its `expired_assignment_behavior`.
    #[arg(long, env = "TOLLGATE_RLQS_ASSIGNMENT_TTL", value_parser = assignment_ttl,
        default_value = "15s", value_name = "DURATION")]
    pub assignment_ttl: Duration,

    /// How long a stream's reports of a bucket may count no request before
    /// the bucket is abandoned on that stream and its share returns to the
    /// others.
    #[arg(long, env = "TOLLGATE_RLQS_ABANDON_AFTER", value_parser = positive_go_duration,
        default_value = "60s", value_name = "DURATION")]
    pub abandon_after: Duration,

    /// The most buckets one stream may hold.
    #[arg(
        long,
        env = "TOLLGATE_RLQS_MAX_BUCKETS_PER_STREAM",
        default_value_t = 10_000,
        value_name = "COUNT"
    )]
    pub max_buckets_per_stream: usize,

    /// The most buckets the server keeps.
    #[arg(
        long,
        env = "TOLLGATE_RLQS_MAX_BUCKETS",
        default_value_t = 1_000_000,
        value_name = "COUNT"
    )]
    pub max_buckets: usize,

    /// The most streams (Envoys' quota streams) open at once; past it a new
    /// stream is refused with `RESOURCE_EXHAUSTED` (Envoy retries at its
    /// next report).
    #[arg(
        long,
        env = "TOLLGATE_RLQS_MAX_STREAMS",
        default_value_t = 100_000,
        value_name = "COUNT"
    )]
    pub max_streams: usize,

    /// What a bucket past either cap is told: `deny` (`DENY_ALL`) or
    /// `allow` (`ALLOW_ALL`).
    #[arg(long, env = "TOLLGATE_RLQS_OVER_CAP", value_enum, default_value_t = OverCap::Deny,
        value_name = "RULE")]
    pub over_cap: OverCap,
}

/// The blanket rule for buckets past a cap.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum OverCap {
    /// `DENY_ALL`.
    Deny,
    /// `ALLOW_ALL`.
    Allow,
}

/// The shortest assignment TTL: one more second than Envoy 1.40's fixed
/// 5 s reporting interval.
pub const SHORTEST_ASSIGNMENT_TTL: Duration = Duration::from_secs(6);

fn assignment_ttl(value: &str) -> Result<Duration, String> {
    let ttl = positive_go_duration(value)?;
    if ttl < SHORTEST_ASSIGNMENT_TTL {
        return Err(format!(
            "'{value}' is under 6s: Envoy 1.40 reports every 5 s, so an assignment would \
             expire between two reports"
        ));
    }
    Ok(ttl)
}

/// Parses `RlqsArguments` alone, for [`RlqsArguments::defaults`].
#[derive(Parser)]
struct Standalone {
    #[command(flatten)]
    arguments: RlqsArguments,
}

impl RlqsArguments {
    /// The defaults, whatever the environment says (for tests and
    /// embedding: no environment variable is read).
    pub fn defaults() -> RlqsArguments {
        let command = Standalone::command().mut_args(|argument| argument.env(None));
        let matches = command.get_matches_from(["tollgate-rlqs"]);
        match Standalone::from_arg_matches(&matches) {
            Ok(standalone) => standalone.arguments,
            // The defaults are constants that parse; no input reaches here.
            Err(error) => error.exit(),
        }
    }

    /// The settings of the environment variables, with flags from
    /// `arguments` (the program name first).
    ///
    /// # Errors
    ///
    /// clap's error for a value that does not parse.
    pub fn try_parse_from<I, T>(arguments: I) -> Result<RlqsArguments, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        Standalone::try_parse_from(arguments).map(|standalone| standalone.arguments)
    }

    /// The allocator's settings.
    pub fn allocator_settings(&self) -> AllocatorSettings {
        AllocatorSettings {
            ttl_s: self.assignment_ttl.as_secs(),
            idle_ns: u64::try_from(self.abandon_after.as_nanos()).unwrap_or(u64::MAX),
            max_buckets_per_stream: self.max_buckets_per_stream,
            max_buckets: self.max_buckets,
            over_cap: match self.over_cap {
                OverCap::Deny => QuotaAssignment::DenyAll,
                OverCap::Allow => QuotaAssignment::AllowAll,
            },
            max_streams: self.max_streams,
        }
    }
}
