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
        value_parser = positive_count,
        value_name = "COUNT"
    )]
    pub max_buckets_per_stream: usize,

    /// The most buckets the server keeps.
    #[arg(
        long,
        env = "TOLLGATE_RLQS_MAX_BUCKETS",
        default_value_t = 1_000_000,
        value_parser = positive_count,
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
        value_parser = positive_count,
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

/// A count of 1 or more: a cap of 0 would refuse every bucket or stream
/// (and a refused stream leaves Envoy to its fallback, unlimited by
/// default), with nothing to show for it.
fn positive_count(value: &str) -> Result<usize, String> {
    match value.parse::<usize>() {
        Ok(0) => Err("0 would refuse everything: give 1 or more".to_owned()),
        Ok(count) => Ok(count),
        Err(_) => Err(format!("'{value}' is not a count")),
    }
}

fn assignment_ttl(value: &str) -> Result<Duration, String> {
    let ttl = positive_go_duration(value)?;
    if ttl.subsec_nanos() != 0 {
        return Err(format!(
            "'{value}' is not whole seconds: Envoy 1.40 cuts a TTL to whole seconds"
        ));
    }
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

/// `tollgate rls`'s settings that mean nothing to the quota service, each
/// with its environment variable: set to other than its default, it is
/// refused at start, so that no one runs `tollgate rlqs` believing (say)
/// that `SHADOW_MODE=true` makes it a dry run.
fn inapplicable(arguments: &RlsArguments, defaults: &RlsArguments) -> Vec<&'static str> {
    let mut set = Vec::new();
    let mut check = |changed: bool, name: &'static str| {
        if changed {
            set.push(name);
        }
    };
    check(
        arguments.near_limit_ratio != defaults.near_limit_ratio,
        "NEAR_LIMIT_RATIO",
    );
    check(
        arguments.stop_cache_key_increment_when_overlimit
            != defaults.stop_cache_key_increment_when_overlimit,
        "STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT",
    );
    check(
        arguments.local_cache_size_in_bytes != defaults.local_cache_size_in_bytes,
        "LOCAL_CACHE_SIZE_IN_BYTES",
    );
    check(arguments.shadow_mode != defaults.shadow_mode, "SHADOW_MODE");
    check(arguments.quota_mode != defaults.quota_mode, "QUOTA_MODE");
    check(
        arguments.response_dynamic_metadata != defaults.response_dynamic_metadata,
        "RESPONSE_DYNAMIC_METADATA",
    );
    check(
        arguments.limit_response_headers_enabled != defaults.limit_response_headers_enabled,
        "LIMIT_RESPONSE_HEADERS_ENABLED",
    );
    check(
        arguments.all_or_nothing != defaults.all_or_nothing,
        "TOLLGATE_ALL_OR_NOTHING",
    );
    check(
        arguments.retry_after_header != defaults.retry_after_header,
        "TOLLGATE_RETRY_AFTER_HEADER",
    );
    check(
        arguments.ietf_headers != defaults.ietf_headers,
        "TOLLGATE_IETF_HEADERS",
    );
    check(arguments.refunds != defaults.refunds, "TOLLGATE_REFUNDS");
    check(
        arguments.store_failure != defaults.store_failure,
        "TOLLGATE_STORE_FAILURE",
    );
    check(
        arguments.store_timeout != defaults.store_timeout,
        "TOLLGATE_STORE_TIMEOUT",
    );
    check(
        arguments.use_prometheus != defaults.use_prometheus,
        "USE_PROMETHEUS",
    );
    check(
        arguments.healthy_with_at_least_one_config_loaded
            != defaults.healthy_with_at_least_one_config_loaded,
        "HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED",
    );
    set
}

impl RlqsArguments {
    /// Refuses `tollgate rls`'s settings that mean nothing here (see
    /// `inapplicable`), naming them.
    ///
    /// # Errors
    ///
    /// The names of the settings set, in a sentence.
    pub fn refuse_inapplicable(&self) -> Result<(), String> {
        let set = inapplicable(&self.rls, &RlsArguments::defaults());
        if set.is_empty() {
            return Ok(());
        }
        Err(format!(
            "{} set, but tollgate rlqs does not use {}: Envoy enforces the \
             assignments, and the quota service's metrics are on its debug \
             listener's /metrics (docs/RLQS.md, Settings)",
            set.join(", "),
            if set.len() == 1 { "it" } else { "them" }
        ))
    }

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
