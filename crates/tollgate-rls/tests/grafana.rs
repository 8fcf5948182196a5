//! `examples/grafana/tollgate-rls.json` against a real Prometheus page of
//! `tollgate rls` (issue #27): every metric its queries name exists on the
//! page after traffic that makes each appear, so a renamed metric fails
//! here. The traffic, over HTTP `/json`: hits within, near and over a
//! limit, hits over a limit in shadow mode, a configuration that fails to
//! load; and (a second service whose Redis never answers) a call that
//! fails.

use std::path::Path;
use std::time::Duration;

use serde_json::json;
use tollgate_rls::settings::Secret;
use tollgate_test_support::exposition::Exposition;
use tollgate_test_support::grafana::dashboard_metrics;
use tollgate_test_support::loopback::free_port;
use tollgate_test_support::rls;

const CONFIG: &str = "domain: gf
descriptors:
  - key: k
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: s
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
";

/// A service with Prometheus on a free loopback port: it and the page's URL.
async fn start(redis: Option<&str>) -> (tollgate_rls::Rls, tempfile::TempDir, String) {
    let mut arguments = rls::arguments();
    let port = free_port();
    arguments.use_prometheus = true;
    arguments.prometheus_addr = format!("127.0.0.1:{port}");
    arguments.redis_url = redis.map(Secret::new);
    let (service, directory) = rls::start_at_noon(CONFIG, arguments).await;
    (
        service,
        directory,
        format!("http://127.0.0.1:{port}/metrics"),
    )
}

async fn hit(client: &reqwest::Client, service: &tollgate_rls::Rls, key: &str) -> u16 {
    let address = service.server().http_address().unwrap();
    let body = json!({"domain": "gf", "descriptors": [{"entries": [{"key": key, "value": "v"}]}]});
    client
        .post(format!("http://{address}/json"))
        .body(body.to_string())
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_metric_of_the_rls_dashboard_is_on_the_page() {
    let client = reqwest::Client::new();
    let (service, directory, page_url) = start(None).await;
    let statuses = [
        hit(&client, &service, "k").await,
        hit(&client, &service, "k").await,
        hit(&client, &service, "k").await,
        hit(&client, &service, "s").await,
        hit(&client, &service, "s").await,
    ];
    // The third hit of 2 a minute is over; shadow mode lets both through.
    assert_eq!(statuses, [200, 200, 429, 200, 200]);
    // A configuration that does not parse: the old one stays, counted.
    std::fs::write(directory.path().join("rl.yaml"), "domain: [").unwrap();
    let mut page = String::new();
    for _ in 0..100 {
        page = client
            .get(&page_url)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        if page.contains("ratelimit_service_config_load_error") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // A service whose Redis refuses connections: its call fails (400, as
    // the Go service's /json answers any error of the call).
    let (failing, _failing_directory, failing_url) = start(Some("redis://127.0.0.1:1")).await;
    assert_eq!(hit(&client, &failing, "k").await, 400);
    let failing_page = client
        .get(&failing_url)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let mut on_page = Exposition::parse(&page).names();
    on_page.extend(Exposition::parse(&failing_page).names());
    let dashboard = dashboard_metrics(
        Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../examples/grafana/tollgate-rls.json"
        )),
        &["ratelimit_"],
    );
    assert!(dashboard.len() >= 8, "{dashboard:?}");
    let missing: Vec<&String> = dashboard
        .iter()
        .filter(|name| !on_page.contains(*name))
        .collect();
    assert!(
        missing.is_empty(),
        "not on the Prometheus page: {missing:?}\n{page}\n{failing_page}"
    );
    rls::stop(service).await;
    rls::stop(failing).await;
}
