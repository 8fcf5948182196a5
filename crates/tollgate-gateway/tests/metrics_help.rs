//! Every metric family on `/metrics` has its `# HELP` and `# TYPE` lines
//! (issue #27), after traffic that makes the counters appear: requests
//! allowed, refused, refused for a slot, delayed, and refused by a limit in
//! shadow mode.

use std::collections::BTreeSet;

use tollgate_test_support::exposition::undescribed;
use tollgate_test_support::gateway::{Gateway, config};
use tollgate_test_support::loopback::Upstream;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_metric_has_help_and_type() {
    let upstream = Upstream::start().await;
    let gateway = Gateway::start(
        &config(&format!(
            "[limits.default_policy]\nalgorithm = \"fixed_window\"\nlimit = 1\nwindow_s = 60\n\
             [[routes]]\nname = \"mh_plain\"\nprefix = \"/\"\nupstream = \"http://{0}\"\n\
             [[routes]]\nname = \"mh_shadow\"\nprefix = \"/shadow\"\nupstream = \"http://{0}\"\n\
             api_key = \"none\"\nrpm = 60\nburst = 1\nshadow = true\n\
             [[routes]]\nname = \"mh_wait\"\nprefix = \"/wait\"\nupstream = \"http://{0}\"\n\
             api_key = \"none\"\nrpm = 600\nburst = 1\ndelay = \"1s\"\n",
            upstream.address
        )),
        0,
    )
    .await;
    assert_eq!(gateway.status("/x", "sk_a").await, 200);
    assert_eq!(gateway.status("/x", "sk_a").await, 429);
    for path in ["/shadow", "/shadow", "/wait", "/wait"] {
        let response = gateway.client.get(gateway.url(path)).send().await.unwrap();
        assert_eq!(response.status(), 200, "{path}");
    }
    let page = gateway.metrics().await;
    let named = |prefix: &str| -> BTreeSet<String> {
        page.lines()
            .filter_map(|line| line.strip_prefix(prefix))
            .filter_map(|rest| rest.split_whitespace().next())
            .map(str::to_owned)
            .collect()
    };
    let typed = named("# TYPE ");
    let helped = named("# HELP ");
    // The families the traffic made appear, each named by hand.
    for family in [
        "tollgate_decisions_total",
        "tollgate_decision_seconds",
        "api_rate_limit_exceeded_total",
        "tollgate_shadow_denials_total",
        "tollgate_delayed_total",
    ] {
        assert!(typed.contains(family), "{family} has no # TYPE:\n{page}");
    }
    let without_help: Vec<&String> = typed.difference(&helped).collect();
    assert!(without_help.is_empty(), "no # HELP for {without_help:?}");
    // Every sample belongs to a family with both lines.
    let undescribed = undescribed(&page);
    assert!(
        undescribed.is_empty(),
        "samples without # TYPE or # HELP: {undescribed:?}"
    );
}
