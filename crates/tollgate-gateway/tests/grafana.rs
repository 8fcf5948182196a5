//! `examples/grafana/tollgate.json` against a real `/metrics` page (issue
//! #27): every metric its queries name exists on the page after traffic
//! that makes each appear, so a renamed metric fails here. The traffic:
//! allowed and refused by a plan, refused by a route budget, by a budget in
//! shadow mode, delayed, refused a concurrency slot, an upstream down, a
//! malformed request body, the access log on, and (a second gateway, whose
//! Redis never answers, failing open) a store failure. Route names gf_*.

use std::path::Path;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tollgate_test_support::exposition::{Exposition, undescribed};
use tollgate_test_support::gateway::{Gateway, config};
use tollgate_test_support::grafana::dashboard_metrics;
use tollgate_test_support::loopback::Upstream;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_metric_of_the_gateway_dashboard_is_on_the_page() {
    let upstream = Upstream::start().await;
    let directory = tempfile::tempdir().unwrap();
    let routes = format!(
        "[[routes]]\nname = \"gf_api\"\nprefix = \"/\"\nupstream = \"http://{0}\"\n\
         [[routes]]\nname = \"gf_budget\"\nprefix = \"/budget\"\nupstream = \"http://{0}\"\n\
         api_key = \"none\"\nrpm = 60\nburst = 1\n\
         [[routes]]\nname = \"gf_shadow\"\nprefix = \"/shadow\"\nupstream = \"http://{0}\"\n\
         api_key = \"none\"\nrpm = 60\nburst = 1\nshadow = true\n\
         [[routes]]\nname = \"gf_wait\"\nprefix = \"/wait\"\nupstream = \"http://{0}\"\n\
         api_key = \"none\"\nrpm = 600\nburst = 1\ndelay = \"1s\"\n\
         [[routes]]\nname = \"gf_slots\"\nprefix = \"/slow\"\nupstream = \"http://{0}\"\n\
         max_in_flight = 1\n\
         [[routes]]\nname = \"gf_down\"\nprefix = \"/down\"\nupstream = \"http://127.0.0.1:1\"\n",
        upstream.address
    );
    let gateway = Gateway::start(
        &config(&format!(
            "[limits.default_policy]\nalgorithm = \"fixed_window\"\nlimit = 2\nwindow_s = 60\n\
             [access_log]\nenabled = true\npath = \"{}\"\n{routes}",
            directory.path().join("access.log").display()
        )),
        0,
    )
    .await;
    assert_eq!(gateway.status("/x", "sk_a").await, 200);
    assert_eq!(gateway.status("/x", "sk_a").await, 200);
    assert_eq!(gateway.status("/x", "sk_a").await, 429);
    for (path, second) in [("/budget", 429), ("/shadow", 200), ("/wait", 200)] {
        for expected in [200, second] {
            let response = gateway.client.get(gateway.url(path)).send().await.unwrap();
            assert_eq!(response.status(), expected, "{path}");
        }
    }
    // One request held in flight; the next of the key is refused a slot.
    let held = gateway
        .client
        .get(gateway.url("/slow"))
        .header("authorization", "Bearer sk_b")
        .send();
    let held = tokio::spawn(held);
    for _ in 0..500 {
        if upstream.requests() > 0 && gateway.running.slots_held() == 1 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(gateway.status("/slow", "sk_b").await, 429);
    upstream.release.notify_waiters();
    assert_eq!(held.await.unwrap().unwrap().status(), 200);
    assert_eq!(gateway.status("/down/x", "sk_c").await, 502);
    // A chunk size that is not hexadecimal: 400, the client's error.
    let mut stream = tokio::net::TcpStream::connect(gateway.running.address)
        .await
        .unwrap();
    stream
        .write_all(
            b"POST /read HTTP/1.1\r\nHost: test\r\nAuthorization: Bearer sk_d\r\n\
              Transfer-Encoding: chunked\r\nConnection: close\r\n\r\nzz\r\nab\r\n0\r\n\r\n",
        )
        .await
        .unwrap();
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response).await;
    assert_eq!(&response[9..12], "400", "{response}");
    // A gateway whose Redis never answers, failing open: a store failure.
    let failing = Gateway::start(
        &config(&format!(
            "[store]\nurl = \"redis://127.0.0.1:1\"\nfailure = \"fail_open\"\ntimeout = \"20ms\"\n\
             [[routes]]\nname = \"gf_store\"\nprefix = \"/\"\nupstream = \"http://{}\"\n",
            upstream.address
        )),
        0,
    )
    .await;
    assert_eq!(failing.status("/x", "sk_e").await, 200);
    // The recorder is the process's: one page holds both gateways' metrics.
    let page = gateway.metrics().await;
    // The page this traffic makes holds nearly every family: each is
    // described (# TYPE and # HELP), the store's and upstream's failures too.
    let undescribed = undescribed(&page);
    assert!(
        undescribed.is_empty(),
        "samples without # TYPE or # HELP: {undescribed:?}"
    );
    let on_page = Exposition::parse(&page).names();
    let dashboard = dashboard_metrics(
        Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../examples/grafana/tollgate.json"
        )),
        &["tollgate_", "api_", "ratelimit_"],
    );
    assert!(dashboard.len() >= 12, "{dashboard:?}");
    let missing: Vec<&String> = dashboard
        .iter()
        .filter(|name| !on_page.contains(*name))
        .collect();
    assert!(missing.is_empty(), "not on /metrics: {missing:?}\n{page}");
}
