//! Envoys whose `envoy.filters.http.rate_limit_quota` filter asks a
//! `tollgate rlqs`, each route a `direct_response` (no upstream), and a load
//! client that offers requests at a fixed rate and notes each answer.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crate::envoy::{ADMIN, grpc_cluster};

/// The filter's settings a test chooses.
#[derive(Clone, Copy, Debug)]
pub struct QuotaFilter<'a> {
    /// The filter's `domain`.
    pub domain: &'a str,
    /// Every request's bucket: `{name: <bucket>}`.
    pub bucket: &'a str,
    /// The blanket rule once an assignment expires (`ALLOW_ALL` or
    /// `DENY_ALL`), for `expired_timeout_s`.
    pub expired: &'a str,
    /// `expired_assignment_behavior_timeout`, seconds.
    pub expired_timeout_s: u64,
}

/// Envoy's configuration: one listener, `main`, on a free port, its filter
/// asking the RLQS at `rlqs` (HTTP/2), requests before a bucket's first
/// assignment allowed; the admin on a free port.
pub fn quota_envoy_config(rlqs: SocketAddr, filter: &QuotaFilter<'_>) -> String {
    format!(
        r#"static_resources:
  listeners:
  - name: main
    address: {{socket_address: {{address: 127.0.0.1, port_value: 0}}}}
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: main
          http_filters:
          - name: envoy.filters.http.rate_limit_quota
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.rate_limit_quota.v3.RateLimitQuotaFilterConfig
              rlqs_server: {{envoy_grpc: {{cluster_name: rlqs}}}}
              domain: {domain}
              bucket_matchers:
                on_no_match:
                  action:
                    name: rate_limit_quota
                    typed_config:
                      "@type": type.googleapis.com/envoy.extensions.filters.http.rate_limit_quota.v3.RateLimitQuotaBucketSettings
                      bucket_id_builder:
                        bucket_id_builder:
                          name: {{string_value: {bucket}}}
                      reporting_interval: 5s
                      no_assignment_behavior:
                        fallback_rate_limit: {{blanket_rule: ALLOW_ALL}}
                      expired_assignment_behavior:
                        expired_assignment_behavior_timeout: {expired_timeout_s}s
                        fallback_rate_limit: {{blanket_rule: {expired}}}
          - name: envoy.filters.http.router
            typed_config: {{"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}}
          route_config:
            virtual_hosts:
            - name: all
              domains: ["*"]
              routes:
              - match: {{prefix: /}}
                direct_response: {{status: 200, body: {{inline_string: ok}}}}
  clusters:
{cluster}{ADMIN}"#,
        domain = filter.domain,
        bucket = filter.bucket,
        expired = filter.expired,
        expired_timeout_s = filter.expired_timeout_s,
        cluster = grpc_cluster("rlqs", rlqs.port()),
    )
}

/// One answered request: when it was sent (since the load's start) and its
/// status (0 when it failed).
#[derive(Clone, Copy, Debug)]
pub struct Answer {
    /// When it was sent, since `start`.
    pub at: Duration,
    /// Its HTTP status, 0 for a failed request.
    pub status: u16,
}

/// Offers `GET /` to `address` at `rate` a second (one request after
/// another on one connection, each sent at its time or as soon as the one
/// before it is answered) from `start` until `start + length`, and gives
/// every answer.
pub async fn offer(
    address: SocketAddr,
    rate: f64,
    start: Instant,
    length: Duration,
) -> Vec<Answer> {
    let client = reqwest::Client::new();
    let url = format!("http://{address}/");
    let mut answers = Vec::new();
    let mut sent: u32 = 0;
    loop {
        let due = start + Duration::from_secs_f64(f64::from(sent) / rate);
        if due >= start + length {
            return answers;
        }
        tokio::time::sleep_until(due.into()).await;
        let at = Instant::now().saturating_duration_since(start);
        let status = match client.get(&url).send().await {
            Ok(response) => response.status().as_u16(),
            Err(_) => 0,
        };
        answers.push(Answer { at, status });
        sent += 1;
    }
}

/// Of `answers` sent within `from..to`: how many, and how many were
/// allowed (200).
pub fn counted(answers: &[Answer], from: Duration, to: Duration) -> (usize, usize) {
    let within: Vec<&Answer> = answers
        .iter()
        .filter(|answer| answer.at >= from && answer.at < to)
        .collect();
    let allowed = within.iter().filter(|answer| answer.status == 200).count();
    (within.len(), allowed)
}
