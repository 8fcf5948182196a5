//! The layer's counters (denials, shadow denials, delayed requests, store
//! failures), recorded through the `metrics` crate so any exporter works.

use std::sync::Arc;

/// The denial counter: incremented by exactly one for each request answered 429,
/// never for an allowed one. Its OpenTelemetry name; the Prometheus exporter
/// writes it as `api_rate_limit_exceeded_total`. Labels: `plugin`, `route`,
/// `key_kind`; never the key itself.
pub const DENIALS_METRIC: &str = "api.rate_limit.exceeded_total";

/// Gives each of the layer's metrics its description, on the recorder
/// installed globally (Prometheus's exporter writes it as the `# HELP`
/// line): call once, after installing the recorder. Describing is
/// idempotent; a process with no recorder describes nothing.
pub fn describe_metrics() {
    metrics::describe_counter!(
        DENIALS_METRIC,
        "Requests refused by a rate limit, by plugin, route and key_kind (never the key)."
    );
    metrics::describe_counter!(
        SHADOW_DENIALS_METRIC,
        "Refusals by a limit in shadow mode, whose requests were let through, by plugin, route \
         and key_kind."
    );
    metrics::describe_counter!(
        DELAYED_METRIC,
        "Requests that waited for their turn (a route's delay) and were then served."
    );
    metrics::describe_counter!(
        STORE_FAILURES_METRIC,
        "Requests whose limits the store could not decide, by plugin, route and the failure \
         policy then applied."
    );
}

/// The `plugin` label of every tollgate metric.
pub const PLUGIN: &str = "tollgate";

/// Counts one denied request of `route` keyed by a key of `kind` (`tenant`,
/// `principal`, `ip`, `custom`, or another kind such as `api_key`).
pub fn record_denial(route: &Arc<str>, kind: &'static str) {
    metrics::counter!(
        DENIALS_METRIC,
        "plugin" => PLUGIN,
        "route" => Arc::clone(route),
        "key_kind" => kind,
    )
    .increment(1);
}

/// The shadow denial counter: incremented by one for each limit in shadow
/// mode that refused a request let through (a dry run, as nginx's
/// `limit_req_dry_run` and Envoy's `shadow_mode`): what enforcing it would
/// have refused. Labels as [`DENIALS_METRIC`]'s: `plugin`, `route`,
/// `key_kind`; never the key itself.
pub const SHADOW_DENIALS_METRIC: &str = "tollgate_shadow_denials_total";

/// Counts one refusal of `route`'s limit keyed by a key of `kind` that shadow
/// mode let through (labels as [`record_denial`]'s).
pub fn record_shadow_denial(route: &Arc<str>, kind: &'static str) {
    metrics::counter!(
        SHADOW_DENIALS_METRIC,
        "plugin" => PLUGIN,
        "route" => Arc::clone(route),
        "key_kind" => kind,
    )
    .increment(1);
}

/// The store failure counter: incremented by one for each request whose
/// limits the [`Store`](tollgate_core::Store) could not decide (Redis down or
/// too slow), whatever the [`FailurePolicy`](crate::FailurePolicy) then did.
/// Labels: `plugin`, `route` (the layer that asked the store), `policy`
/// (`fail_open` or `fail_closed`; `settle` for a usage settled after the
/// response, [`RouteLimitLayer::charge`](crate::RouteLimitLayer::charge),
/// that the store failed: the request keeps its cost). The gateway server counts under the same
/// name and labels (its route names in `route`).
pub const STORE_FAILURES_METRIC: &str = "tollgate_store_failures_total";

/// Counts one request of `route` the store could not decide, under `policy`
/// ([`FailurePolicy::label`](tollgate_core::FailurePolicy::label): `fail_open`
/// or `fail_closed`). The gateway server counts its own failures here too.
pub fn record_store_failure(route: &Arc<str>, policy: &'static str) {
    metrics::counter!(
        STORE_FAILURES_METRIC,
        "plugin" => PLUGIN,
        "route" => Arc::clone(route),
        "policy" => policy,
    )
    .increment(1);
}

/// The delayed counter: incremented by one for each request that waited
/// for its turn ([`RouteLimitLayer::delay`](crate::RouteLimitLayer::delay))
/// and was then served. Labels: `plugin`, `route` (the outermost layer's,
/// which decided). The gateway server counts under the same name, by `tier`
/// and `route`, likewise once served.
pub const DELAYED_METRIC: &str = "tollgate_delayed_total";

/// Counts one request of `route` served after waiting for its turn.
pub fn record_delayed(route: &Arc<str>) {
    metrics::counter!(
        DELAYED_METRIC,
        "plugin" => PLUGIN,
        "route" => Arc::clone(route),
    )
    .increment(1);
}
