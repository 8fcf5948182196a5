//! The debug listener's pages: `/rlqs` (each bucket's limit, streams, demand
//! and assignments as JSON, values redacted unless the bucket's descriptor
//! has `detailed_metric`) and `/metrics` (Prometheus text, per domain, never
//! a bucket's values).
//!
//! The counters are this server's own (kept by its allocator), rendered
//! here as `tollgate rls` renders its stats, rather than through the
//! process-wide `metrics` recorder, so that several servers in one process
//! (the tests) each count their own.

use std::fmt::Write as _;

use serde_json::{Value, json};
use tollgate_core::QuotaAssignment;

use crate::allocator::BucketSnapshot;
use crate::limit::BucketLimit;
use crate::quotas::Quotas;

/// `/rlqs`: the buckets as JSON (`{"settings": …, "buckets": […]}`).
pub fn buckets_json(quotas: &Quotas) -> Value {
    let settings = quotas.settings();
    let buckets: Vec<Value> = quotas.snapshot().iter().map(bucket_json).collect();
    json!({
        "settings": {
            "assignment_ttl_s": settings.ttl_s,
            "abandon_after_s": settings.idle_ns / 1_000_000_000,
            "max_buckets_per_stream": settings.max_buckets_per_stream,
            "max_buckets": settings.max_buckets,
            "max_streams": settings.max_streams,
            "over_cap": assignment_json(settings.over_cap),
            "config_loaded": quotas.config_loaded(),
        },
        "buckets": buckets,
    })
}

fn bucket_json(bucket: &BucketSnapshot) -> Value {
    let limit = match bucket.limit {
        BucketLimit::AllowAll => json!("allow_all"),
        BucketLimit::DenyAll => json!("deny_all"),
        BucketLimit::Shared(rate) => json!({
            "tokens": rate.tokens, "per_s": rate.per_s, "burst": rate.burst,
        }),
        BucketLimit::Window(rate) => json!({
            "tokens": rate.tokens, "per_s": rate.per_s, "fixed_window": true,
            "window_used": bucket.window_used, "budget": bucket.budget,
        }),
    };
    let streams: Vec<Value> = bucket
        .streams
        .iter()
        .map(|stream| {
            json!({
                "stream": stream.stream,
                "demand_per_s": stream.demand_milli as f64 / 1000.0,
                "part": stream.part,
                "assignment": stream.assignment.map(assignment_json),
            })
        })
        .collect();
    json!({
        "domain": &*bucket.domain,
        "bucket": bucket.bucket,
        "limit": limit,
        "streams": streams,
    })
}

fn assignment_json(assignment: QuotaAssignment) -> Value {
    match assignment {
        QuotaAssignment::AllowAll => json!("allow_all"),
        QuotaAssignment::DenyAll => json!("deny_all"),
        QuotaAssignment::TokenBucket {
            max_tokens,
            tokens_per_fill,
            fill_interval_s,
        } => json!({
            "max_tokens": max_tokens,
            "tokens_per_fill": tokens_per_fill,
            "fill_interval_s": fill_interval_s,
        }),
    }
}

/// The families of `/metrics`: name, type and help.
const FAMILIES: [(&str, &str, &str); 8] = [
    (
        "tollgate_rlqs_streams",
        "gauge",
        "Streams holding at least one bucket of the domain.",
    ),
    (
        "tollgate_rlqs_buckets",
        "gauge",
        "Buckets the server keeps for the domain.",
    ),
    (
        "tollgate_rlqs_reported_allowed_total",
        "counter",
        "Requests the Envoys reported allowed.",
    ),
    (
        "tollgate_rlqs_reported_denied_total",
        "counter",
        "Requests the Envoys reported denied.",
    ),
    (
        "tollgate_rlqs_assignments_total",
        "counter",
        "Assignments sent: answers to reports and limits pushed on a reload.",
    ),
    (
        "tollgate_rlqs_abandons_total",
        "counter",
        "Abandons sent for buckets idle on a stream.",
    ),
    (
        "tollgate_rlqs_over_cap_total",
        "counter",
        "Buckets refused past the per-stream or overall cap.",
    ),
    (
        "tollgate_rlqs_refused_total",
        "counter",
        "Reports or buckets refused as malformed.",
    ),
];

/// `/metrics`: every family, one sample per domain (`domain` label).
pub fn prometheus_page(quotas: &Quotas) -> String {
    let counters = quotas.counters();
    let mut page = String::new();
    for (index, (name, kind, help)) in FAMILIES.iter().enumerate() {
        let _ = writeln!(page, "# HELP {name} {help}");
        let _ = writeln!(page, "# TYPE {name} {kind}");
        for (domain, counts) in &counters {
            let value = [
                counts.streams,
                counts.buckets,
                counts.allowed,
                counts.denied,
                counts.assignments,
                counts.abandons,
                counts.over_cap,
                counts.refused,
            ][index];
            let _ = writeln!(page, "{name}{{domain=\"{}\"}} {value}", escape(domain));
        }
    }
    let _ = writeln!(
        page,
        "# HELP tollgate_rlqs_dropped_messages_total Messages dropped because a stream did not read its answers.\n\
         # TYPE tollgate_rlqs_dropped_messages_total counter\n\
         tollgate_rlqs_dropped_messages_total {}\n\
         # HELP tollgate_rlqs_store_failures_total Reports (or a stream's leaving) the shared store could not back: the store failed, stalled or stayed in conflict.\n\
         # TYPE tollgate_rlqs_store_failures_total counter\n\
         tollgate_rlqs_store_failures_total {}\n\
         # HELP tollgate_rlqs_refused_streams_total Streams refused because TOLLGATE_RLQS_MAX_STREAMS were open.\n\
         # TYPE tollgate_rlqs_refused_streams_total counter\n\
         tollgate_rlqs_refused_streams_total {}\n\
         # HELP tollgate_rlqs_config_loaded 1 when a configuration is loaded; 0 when none is (every bucket is then ALLOW_ALL).\n\
         # TYPE tollgate_rlqs_config_loaded gauge\n\
         tollgate_rlqs_config_loaded {}",
        quotas.dropped(),
        quotas.store_failures(),
        quotas.refused_streams(),
        u8::from(quotas.config_loaded())
    );
    page
}

/// A label value escaped as the Prometheus text format asks.
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}
