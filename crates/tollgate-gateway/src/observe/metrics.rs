//! The gateway's metrics, recorded through the `metrics` crate and rendered in
//! the Prometheus text format on `/metrics`.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use metrics::{Counter, Histogram};

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use tollgate_core::FailurePolicy;

/// Decisions by `outcome` (`allowed`, `rejected`), `tier` and `route`.
pub(crate) const DECISIONS: &str = "tollgate_decisions_total";
/// How long the limit decision took, in seconds (a histogram).
pub(crate) const DECISION_SECONDS: &str = "tollgate_decision_seconds";
/// Keys holding limiter state, at the last scrape.
pub(crate) const TRACKED_KEYS: &str = "tollgate_tracked_keys";
/// Forwarded requests whose upstream failed them, by `route`, `server`
/// (`host:port`) and `failure`.
pub(crate) const UPSTREAM_FAILURES: &str = "tollgate_upstream_failures_total";

/// The share of the limit store that could decide at the last check (start,
/// and every `/readyz`): 1 or 0 for one Redis server (or memory, always 1);
/// for a Redis Cluster, the share of hash slots whose primary answered.
pub(crate) const STORE_UP: &str = "tollgate_store_up";

/// Requests refused by a route's concurrency limit (`max_in_flight`), by
/// `route`.
pub(crate) const IN_FLIGHT_REFUSALS: &str = "tollgate_in_flight_refusals_total";

/// Counts a request of `route` refused for a slot.
pub(crate) fn record_in_flight_refusal(route: &Arc<str>) {
    metrics::counter!(IN_FLIGHT_REFUSALS, "route" => Arc::clone(route)).increment(1);
}

/// Records the share of the store that could decide at the last check.
pub(crate) fn record_store_up(share: f64) {
    metrics::gauge!(STORE_UP).set(share);
}

/// Requests that waited for their turn (a route's `delay`) and were then
/// forwarded, by `tier` and `route`.
pub(crate) const DELAYED: &str = "tollgate_delayed_total";

/// Counts a request of `route` and `tier` that waits for its turn.
pub(crate) fn record_delayed(route: &Arc<str>, tier: &str) {
    metrics::counter!(DELAYED, "tier" => tier.to_owned(), "route" => Arc::clone(route))
        .increment(1);
}

/// Responses of routes charged by usage (`charge`) that reported none, or a
/// bad one (their requests keep `cost`), by `route`.
pub(crate) const CHARGE_MISSING: &str = "tollgate_charge_missing_total";

/// Responses of routes charged by usage that reported more than
/// `charge.max` (charged `max`), by `route`.
pub(crate) const CHARGE_CLAMPED: &str = "tollgate_charge_clamped_total";

/// Counts a response of `route` without a usable report of its usage.
pub(crate) fn record_charge_missing(route: &Arc<str>) {
    metrics::counter!(CHARGE_MISSING, "route" => Arc::clone(route)).increment(1);
}

/// Counts a response of `route` that reported more than `charge.max`.
pub(crate) fn record_charge_clamped(route: &Arc<str>) {
    metrics::counter!(CHARGE_CLAMPED, "route" => Arc::clone(route)).increment(1);
}

/// Requests whose body the client sent malformed or cut off (answered 400),
/// by `route`: the client's errors, apart from the upstream's.
pub(crate) const CLIENT_BODY_ERRORS: &str = "tollgate_client_body_errors_total";

/// Counts a request of `route` whose body the client sent malformed.
pub(crate) fn record_client_body_error(route: &Arc<str>) {
    metrics::counter!(CLIENT_BODY_ERRORS, "route" => Arc::clone(route)).increment(1);
}

/// How an upstream failed a forwarded request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum UpstreamFailure {
    /// It answered 101 Switching Protocols to a request that asked for no
    /// upgrade (502).
    SwitchedUnasked,
    /// It could not be reached: no connection (the request then goes to the
    /// route's next server, if any, else the client gets 502), or the
    /// connection failed before the response headers (502).
    Unreachable,
    /// It sent no response headers in time (504).
    Timeout,
    /// It paused in the middle of the response body longer than allowed, and
    /// the response was cut off.
    BodyStalled,
    /// Its response body broke off before its end (the connection closed
    /// short of a `Content-Length`, or before the last chunk); the client's
    /// response was cut off likewise.
    BodyBroken,
}

impl UpstreamFailure {
    /// The `failure` label.
    fn label(self) -> &'static str {
        match self {
            UpstreamFailure::Unreachable => "unreachable",
            UpstreamFailure::Timeout => "timeout",
            UpstreamFailure::BodyStalled => "body_stalled",
            UpstreamFailure::BodyBroken => "body_broken",
            UpstreamFailure::SwitchedUnasked => "switched_unasked",
        }
    }
}

/// Counts a request of `route` that its server `server` (`host:port`)
/// failed.
pub(crate) fn record_upstream_failure(
    route: &Arc<str>,
    server: &Arc<str>,
    failure: UpstreamFailure,
) {
    metrics::counter!(
        UPSTREAM_FAILURES,
        "route" => Arc::clone(route),
        "server" => Arc::clone(server),
        "failure" => failure.label(),
    )
    .increment(1);
}

/// Counts a store failure, and logs it (at most once a second, so a Redis
/// outage does not flood the logs).
/// The counter is the tower layer's (`tollgate_store_failures_total`, labels
/// `plugin`, `route`, `policy`).
pub(crate) fn record_store_failure(
    route: &Arc<str>,
    policy: FailurePolicy,
    error: &tollgate_core::StoreError,
) {
    let policy = policy.label();
    tollgate_tower::record_store_failure(route, policy);
    static LAST_LOG: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let second = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_secs());
    if LAST_LOG.swap(second, std::sync::atomic::Ordering::Relaxed) != second {
        tracing::warn!(%error, policy, "the limit store cannot decide; applying the failure policy");
    }
}

/// How often the recorder's histogram samples are folded into its buckets.
const UPKEEP_INTERVAL: Duration = Duration::from_secs(5);

/// The process's Prometheus recorder, installed on first use (a process has
/// one global recorder; every gateway in it reports there). A thread of its
/// own folds the histogram samples into buckets every [`UPKEEP_INTERVAL`]:
/// the recorder keeps every sample until then, so without it a gateway that
/// nobody scrapes would hold on to memory for every request.
pub(crate) fn handle() -> PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let recorder = PrometheusBuilder::new()
                .set_buckets_for_metric(
                    Matcher::Full(DECISION_SECONDS.to_owned()),
                    &[
                        1e-6, 2.5e-6, 5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 1e-3, 1e-2, 1e-1,
                    ],
                )
                .map(PrometheusBuilder::build_recorder);
            match recorder {
                Ok(recorder) => {
                    let handle = recorder.handle();
                    if metrics::set_global_recorder(recorder).is_err() {
                        tracing::warn!(
                            "another metrics recorder is installed; /metrics stays empty"
                        );
                    }
                    describe_metrics();
                    start_upkeep(handle.clone());
                    handle
                }
                Err(error) => {
                    tracing::warn!(%error, "cannot build the Prometheus recorder");
                    PrometheusBuilder::new().build_recorder().handle()
                }
            }
        })
        .clone()
}

/// Gives every metric of the gateway its description: the `# HELP` line
/// of `/metrics` (the exporter writes `# TYPE` for each).
fn describe_metrics() {
    let counters = [
        (
            DECISIONS,
            "Limit decisions, by outcome (allowed, rejected), tier and route.",
        ),
        (
            UPSTREAM_FAILURES,
            "Forwarded requests their upstream failed, by route, server (host:port) and failure.",
        ),
        (
            IN_FLIGHT_REFUSALS,
            "Requests refused by a concurrency limit (max_in_flight), by route.",
        ),
        (
            DELAYED,
            "Requests that waited for their turn (a delay) and were then forwarded, by tier and route.",
        ),
        (
            CLIENT_BODY_ERRORS,
            "Requests whose body the client sent malformed or cut off (answered 400), by route.",
        ),
        (
            CHARGE_MISSING,
            "Responses of routes charged by usage that reported no usage or a bad one (charged cost), by route.",
        ),
        (
            CHARGE_CLAMPED,
            "Responses of routes charged by usage that reported more than charge.max (charged max), by route.",
        ),
        (
            crate::observe::access_log::DROPPED,
            "Access log lines dropped because the writer fell behind.",
        ),
    ];
    for (name, help) in counters {
        metrics::describe_counter!(name, help);
    }
    metrics::describe_histogram!(
        DECISION_SECONDS,
        "How long the limit decision of a request took, in seconds."
    );
    metrics::describe_gauge!(
        TRACKED_KEYS,
        "Keys holding limiter state, at the last scrape."
    );
    metrics::describe_gauge!(
        STORE_UP,
        "The share of the limit store that could decide at the last check (1: all of it)."
    );
    // After the gateway's own: the exporter keeps a metric's first
    // description, and the gateway labels `tollgate_delayed_total` by tier.
    tollgate_tower::describe_metrics();
}

/// Runs the recorder's upkeep every [`UPKEEP_INTERVAL`] for the life of the
/// process.
fn start_upkeep(handle: PrometheusHandle) {
    let started = std::thread::Builder::new()
        .name("tollgate-metrics-upkeep".into())
        .spawn(move || {
            loop {
                std::thread::sleep(UPKEEP_INTERVAL);
                handle.run_upkeep();
            }
        });
    if let Err(error) = started {
        tracing::warn!(%error, "cannot start the metrics upkeep thread; histograms grow until scraped");
    }
}

/// The allowed and rejected counters of one route and tier.
type OutcomeCounters = (Counter, Counter);

/// A map keyed by route or tier name: names come from the configuration and
/// the admin API, not from requests, so a fast hash suffices.
type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

/// The decision counters of every known route and tier, registered once so
/// that counting a decision is a map lookup and an atomic add.
#[derive(Debug, Default)]
pub(crate) struct DecisionCounters {
    /// route → tier → (allowed, rejected)
    counters: HashMap<Arc<str>, HashMap<Arc<str>, OutcomeCounters>>,
    latency: Option<Histogram>,
}

impl DecisionCounters {
    /// Counters for every pair of `routes` and `tiers`.
    pub(crate) fn new<'a>(
        routes: impl IntoIterator<Item = &'a Arc<str>>,
        tiers: &[Arc<str>],
    ) -> Self {
        let _ = handle();
        let counters = routes
            .into_iter()
            .map(|route| {
                let per_tier = tiers
                    .iter()
                    .map(|tier| {
                        let counter = |outcome: &'static str| {
                            metrics::counter!(
                                DECISIONS,
                                "outcome" => outcome,
                                "tier" => Arc::clone(tier),
                                "route" => Arc::clone(route),
                            )
                        };
                        (Arc::clone(tier), (counter("allowed"), counter("rejected")))
                    })
                    .collect();
                (Arc::clone(route), per_tier)
            })
            .collect();
        DecisionCounters {
            counters,
            latency: Some(metrics::histogram!(DECISION_SECONDS)),
        }
    }

    pub(crate) fn record(&self, allowed: bool, tier: &str, route: &Arc<str>) {
        match self
            .counters
            .get(&**route)
            .and_then(|tiers| tiers.get(tier))
        {
            Some((allowed_counter, rejected_counter)) => {
                if allowed {
                    allowed_counter
                } else {
                    rejected_counter
                }
                .increment(1);
            }
            None => {
                let outcome = if allowed { "allowed" } else { "rejected" };
                metrics::counter!(
                    DECISIONS,
                    "outcome" => outcome,
                    "tier" => tier.to_owned(),
                    "route" => Arc::clone(route),
                )
                .increment(1);
            }
        }
    }

    /// The routes counted, in no order.
    #[cfg(test)]
    pub(crate) fn routes(&self) -> Vec<&str> {
        self.counters.keys().map(|route| &**route).collect()
    }

    pub(crate) fn record_time(&self, elapsed: Duration) {
        if let Some(latency) = &self.latency {
            latency.record(elapsed.as_secs_f64());
        }
    }
}

pub(crate) fn record_tracked_keys(keys: u64) {
    metrics::gauge!(TRACKED_KEYS).set(keys as f64);
}
