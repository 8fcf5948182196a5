//! A replay of a log written by a live gateway, under the configuration it
//! ran with, reproduces every decision (issue #27): real HTTP traffic
//! through a gateway in process on a manual clock, its JSON access log read
//! back and replayed. The traffic, with each decision worked out by hand:
//!
//! - `sk_a` on the default plan, a fixed window of 3 a minute: 5 requests
//!   at 600 s (3 allowed, 2 refused), 2 at 630 s (the same window:
//!   refused), 2 at 670 s (a new window: allowed);
//! - `sk_pro` on tier `pro` (assigned through the admin API), a token
//!   bucket of 2 per 10 s, burst 2: 4 at 600 s (2 allowed, 2 refused), 1 at
//!   605 s (one token back: allowed);
//! - `/open` reads no key, 2 per client address (a burst of 2): 3 at 600 s
//!   (2 allowed, 1 refused);
//! - `/shadow`, a budget of 1 in shadow mode: 2 by `sk_b` at 600 s (allowed,
//!   then refused in shadow mode, let through);
//! - `sk_internal`, exempt: 2; `/nowhere`: 1 (404, no decision).

use std::time::Duration;

use tollgate_core::Fingerprinter;
use tollgate_gateway::config::ServeConfig;
use tollgate_replay::{Candidate, Format, Options, Replayer, Source, replay};
use tollgate_test_support::gateway::{Gateway, config};
use tollgate_test_support::loopback::Upstream;

fn settings(upstream: &Upstream, log: &std::path::Path) -> String {
    config(&format!(
        "[limits]\nexempt_keys = [\"sk_internal\"]\n\
         [limits.default_policy]\nalgorithm = \"fixed_window\"\nlimit = 3\nwindow_s = 60\n\
         [limits.tiers.pro]\nalgorithm = \"token_bucket\"\nlimit = 2\nwindow_s = 10\nburst = 2\n\
         [access_log]\nenabled = true\npath = \"{}\"\n\
         [[routes]]\nname = \"lv_api\"\nprefix = \"/api\"\nupstream = \"http://{1}\"\n\
         [[routes]]\nname = \"lv_open\"\nprefix = \"/open\"\nupstream = \"http://{1}\"\n\
         api_key = \"none\"\nrpm = 2\nburst = 2\nkey = \"ip\"\n\
         [[routes]]\nname = \"lv_shadow\"\nprefix = \"/shadow\"\nupstream = \"http://{1}\"\n\
         rpm = 1\nburst = 1\nshadow = true\n",
        log.display(),
        upstream.address
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replay_of_a_live_gateways_log_reproduces_every_decision() {
    let upstream = Upstream::start().await;
    let directory = tempfile::tempdir().unwrap();
    let log = directory.path().join("access.log");
    let toml = settings(&upstream, &log);
    let gateway = Gateway::start(&toml, 600).await;
    let tier = gateway
        .admin(
            reqwest::Method::POST,
            "/admin/tier",
            Some(serde_json::json!({"key": "sk_pro", "tier": "pro"})),
        )
        .await;
    assert_eq!(tier.status(), 200);
    let mut statuses = Vec::new();
    for _ in 0..5 {
        statuses.push(gateway.status("/api/a", "sk_a").await);
    }
    for _ in 0..4 {
        statuses.push(gateway.status("/api/a", "sk_pro").await);
    }
    for _ in 0..3 {
        let response = gateway
            .client
            .get(gateway.url("/open"))
            .send()
            .await
            .unwrap();
        statuses.push(response.status().as_u16());
    }
    for _ in 0..2 {
        statuses.push(gateway.status("/shadow", "sk_b").await);
        statuses.push(gateway.status("/api/a", "sk_internal").await);
    }
    statuses.push(gateway.status("/nowhere", "sk_a").await);
    gateway.clock.advance(Duration::from_secs(5));
    statuses.push(gateway.status("/api/a", "sk_pro").await);
    gateway.clock.advance(Duration::from_secs(25));
    for _ in 0..2 {
        statuses.push(gateway.status("/api/a", "sk_a").await);
    }
    gateway.clock.advance(Duration::from_secs(40));
    for _ in 0..2 {
        statuses.push(gateway.status("/api/a", "sk_a").await);
    }
    assert_eq!(
        statuses,
        [
            200, 200, 200, 429, 429, // sk_a at 600 s
            200, 200, 429, 429, // sk_pro at 600 s
            200, 200, 429, // /open
            200, 200, 200, 200, // /shadow and sk_internal, in turn
            404, // /nowhere
            200, // sk_pro at 605 s
            429, 429, // sk_a at 630 s
            200, 200, // sk_a at 670 s
        ]
    );
    gateway.running.shutdown().await;
    let text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(text.lines().count(), 22, "{text}");
    let config = ServeConfig::from_toml_str(&toml).unwrap();
    let fingerprints = Fingerprinter::new(None);
    let candidates = [Candidate {
        name: "gateway.toml".to_owned(),
        replayer: Replayer::new(&config, &fingerprints).unwrap(),
        fingerprints,
    }];
    let report = replay(
        vec![Source {
            name: "access.log".to_owned(),
            reader: Box::new(std::io::Cursor::new(text.into_bytes())),
        }],
        &Format::Tollgate,
        &candidates,
        Options {
            most: 5,
            ..Options::default()
        },
    );
    assert_eq!(
        (report.lines, report.bad_lines, report.out_of_order),
        (22, 0, 0)
    );
    let result = &report.configs[0];
    let agreement = result.agreement.as_ref().unwrap();
    // Every line but the 404's carries a decision to compare.
    assert_eq!(
        (agreement.compared, agreement.agreed),
        (21, 21),
        "{agreement:?}"
    );
    assert_eq!(result.exempt, 2);
    // Decided: sk_a 9 (4 refused: 2 at 600 s, 2 at 630 s), sk_pro 5 (2
    // refused), /open 3 (1), /shadow 2 (1, in shadow mode).
    assert_eq!((result.overall.requests, result.overall.refused), (19, 8));
    let tier = |name: &str| {
        let figures = &result.tiers[name];
        (figures.requests, figures.refused)
    };
    assert_eq!(tier("default"), (11, 5));
    assert_eq!(tier("pro"), (5, 2));
    assert_eq!(tier("keyless"), (3, 1));
    let route = |name: &str| {
        let figures = &result.routes[name];
        (figures.requests, figures.refused)
    };
    assert_eq!(route("lv_api"), (14, 6));
    assert_eq!(route("lv_open"), (3, 1));
    assert_eq!(route("lv_shadow"), (2, 1));
    // sk_a's fingerprint (Python: sha256(b"plan\0sk_a")[:8] in hex) was
    // refused most: 4 times.
    assert_eq!(result.overall.most_refused[0].key, "19b10fb0f2540938");
    assert_eq!(result.overall.most_refused[0].refused, 4);
    // Second 600 holds 14 decided requests (5 + 4 + 3 + 2; the exempt
    // ones and the 404 are not decided); minute 10 (600 to 659 s) 17.
    assert_eq!(result.overall.peak_per_second, 14);
    assert_eq!(result.overall.peak_per_minute, 17);
}
