//! The denial counter, recorded through the `metrics` crate so any exporter works.

use std::sync::Arc;

/// The denial counter: incremented by exactly one for each request answered 429,
/// never for an allowed one. Its OpenTelemetry name; the Prometheus exporter
/// writes it as `api_rate_limit_exceeded_total`. Labels: `plugin`, `route`,
/// `key_kind`; never the key itself.
pub const DENIALS_METRIC: &str = "api.rate_limit.exceeded_total";

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

/// The store failure counter: incremented by one for each request whose
/// limits the [`Store`](tollgate_core::Store) could not decide (Redis down or
/// too slow), whatever the [`FailurePolicy`](crate::FailurePolicy) then did.
/// Labels: `plugin`, `route` (the layer that asked the store), `policy`
/// (`fail_open` or `fail_closed`). The gateway server counts under the same
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
