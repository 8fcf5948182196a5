//! `tollgate serve` with its limits in Redis: three gateway processes share one
//! budget, on one Redis server or a Redis Cluster; when Redis is gone, requests
//! follow the failure policy.

mod process;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use process::Process;
use tollgate_test_support::gateway::config;
use tollgate_test_support::loopback::Upstream;
use tollgate_test_support::redis as redis_support;

/// Three gateways on one Redis, each with the limit `policy` (20 per window),
/// and a hundred and twenty requests for one key spread over them at once.
async fn passes_through_three_gateways(
    url: &str,
    upstream: &Upstream,
    policy: &str,
    name: &str,
) -> usize {
    let prefix = redis_support::prefix(name);
    let passed = through_three_gateways(url, &prefix, upstream, policy, "", name).await;
    redis_support::cleanup(url, &prefix);
    passed
}

/// Three gateways under `prefix` with the plan limit `policy` and the route
/// settings `route`: how many of 120 requests at once pass.
async fn through_three_gateways(
    url: &str,
    prefix: &str,
    upstream: &Upstream,
    policy: &str,
    route: &str,
    name: &str,
) -> usize {
    let mut gateways = Vec::new();
    for index in 0..3 {
        let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}-{index}.toml"));
        let text = config(&format!(
            "[store]\nurl = \"{url}\"\nprefix = \"{prefix}\"\ntimeout = \"2s\"\nfailure = \"fail_closed\"\n\
             [limits.default_policy]\n{policy}\n\
             [[routes]]\nprefix = \"/\"\nupstream = \"http://{}\"\n{route}\n",
            upstream.address
        ));
        std::fs::write(&path, text).unwrap();
        gateways.push(Arc::new(Process::start(&path).await));
    }
    let barrier = Arc::new(tokio::sync::Barrier::new(120));
    let clients: Vec<_> = (0..120)
        .map(|index| {
            let gateway = Arc::clone(&gateways[index % 3]);
            let barrier = Arc::clone(&barrier);
            tokio::spawn(async move {
                barrier.wait().await;
                gateway.get("/").await.status().as_u16()
            })
        })
        .collect();
    let mut passed = 0;
    for client in clients {
        let status = client.await.unwrap();
        assert!(status == 200 || status == 429, "{status}");
        passed += usize::from(status == 200);
    }
    passed
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[cfg_attr(not(has_redis), ignore = "set REDIS_URL=redis://127.0.0.1:6379 to run")]
async fn three_gateways_on_one_redis_share_one_budget_on_every_algorithm() {
    let url = redis_support::require_redis_url();
    let upstream = Upstream::start().await;
    let policies = [
        // The gateways decide on Redis's clock, which a test cannot set:
        // windows of 4e9 s (epoch-aligned, the next boundary in 2096) so no
        // boundary falls between the requests.
        (
            "fixed_window",
            "algorithm = \"fixed_window\"\nlimit = 20\nwindow_s = 4000000000",
        ),
        (
            "sliding_log",
            "algorithm = \"sliding_log\"\nlimit = 20\nwindow_s = 3600",
        ),
        // 20 tokens, one more every 180 s: none comes back during the test.
        (
            "token_bucket",
            "algorithm = \"token_bucket\"\nlimit = 20\nwindow_s = 3600",
        ),
    ];
    for (name, policy) in policies {
        let passed = passes_through_three_gateways(&url, &upstream, policy, name).await;
        assert_eq!(passed, 20, "{name}");
    }
    assert_eq!(upstream.requests(), 60);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[cfg_attr(
    not(has_redis_cluster),
    ignore = "set REDIS_CLUSTER_URL to run (.ci/redis-cluster start DIR prints one)"
)]
async fn three_gateways_on_a_redis_cluster_share_plan_and_route_budgets() {
    let url = redis_support::require_cluster_url();
    let upstream = Upstream::start().await;
    let prefix = redis_support::prefix("cluster-gateways");
    // The plan allows 20 per window; the route 10 per client IP (a bucket of 10,
    // one more a minute): the route refuses first, and its refusals take
    // nothing from the plan, whose keys sit in another slot.
    // A window of 4e9 s: no boundary between the requests (see above).
    let plan = "algorithm = \"fixed_window\"\nlimit = 20\nwindow_s = 4000000000";
    let route = "rpm = 1\nburst = 10\nkey = \"ip\"";
    let passed =
        through_three_gateways(&url, &prefix, &upstream, plan, route, "cluster-gateways").await;
    assert_eq!(passed, 10);
    assert_eq!(upstream.requests(), 10);
    let mut redis = tollgate_redis::RedisConfig::new(url.as_str());
    redis.prefix = prefix.clone();
    redis.timeout = Duration::from_secs(2);
    let limits = tollgate_core::LimiterConfig {
        default_policy: tollgate_core::Policy::fixed_window(20, 4_000_000_000).unwrap(),
        ..tollgate_core::LimiterConfig::default()
    };
    let store = tollgate_redis::RedisStore::connect(redis, &limits).unwrap();
    let plan = tollgate_core::Store::inspect(&store, "sk_a").await.unwrap();
    assert_eq!(plan.state.unwrap().remaining, Some(10), "20 - 10");
    redis_support::cleanup(&url, &prefix);
}

/// Redis's shared default policy wins over a file's (issue #28): a second
/// gateway whose file says otherwise warns at start, naming both, and
/// `check-config --store` says which is in force.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(has_redis), ignore = "set REDIS_URL=redis://127.0.0.1:6379 to run")]
async fn a_file_whose_policy_redis_overrides_is_told_so() {
    let url = redis_support::require_redis_url();
    let prefix = redis_support::prefix("policy-override");
    let upstream = Upstream::start().await;
    let file = |name: &str, limit: u64| {
        let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("override-{name}.toml"));
        std::fs::write(
            &path,
            config(&format!(
                "[store]\nurl = \"{url}\"\nprefix = \"{prefix}\"\ntimeout = \"2s\"\n\
                 [limits.default_policy]\nalgorithm = \"fixed_window\"\nlimit = {limit}\n\
                 window_s = 60\n\
                 [[routes]]\nprefix = \"/\"\nupstream = \"http://{}\"\n",
                upstream.address
            )),
        )
        .unwrap();
        path
    };
    let check = |path: &PathBuf| {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_tollgate"))
            .arg("check-config")
            .arg(path)
            .output()
            .unwrap();
        assert!(output.status.success(), "{output:?}");
        String::from_utf8(output.stdout)
            .unwrap()
            .lines()
            .find(|line| line.starts_with("default policy in force: "))
            .unwrap()
            .to_owned()
    };
    let (first, second) = (file("first", 3), file("second", 9));
    // Nothing in Redis yet: the file's goes in at the first start.
    assert!(check(&first).starts_with("default policy in force: this file's, which the first"));
    let mut gateway = Process::start(&first).await;
    // The first gateway's policy is now Redis's (written by its store's
    // first read of Redis, which may come just after it listens).
    let mut in_force = check(&first);
    for _ in 0..50 {
        if !in_force.contains("which the first") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        in_force = check(&first);
    }
    assert!(
        in_force.starts_with("default policy in force: this file's, as Redis"),
        "{in_force}"
    );
    assert_eq!(
        check(&second),
        format!(
            "default policy in force: Redis's ({url}, prefix {prefix}): fixed_window 3 per 60 s; \
             this file's (fixed_window 9 per 60 s) is not applied: PUT /admin/policy puts a \
             policy in force on every gateway"
        )
    );
    let mut overridden = Process::start(&second).await;
    // Said at the first read of Redis's policy: before or after the line
    // that says where it listens.
    let said = |entry: &serde_json::Value| {
        entry["fields"]["message"]
            .as_str()
            .is_some_and(|text| text.contains("not this configuration's"))
    };
    let warning = match overridden.early.iter().find(|entry| said(entry)) {
        Some(entry) => entry.clone(),
        None => Process::wait_for(&mut overridden.logs, "not this configuration's").await,
    };
    assert_eq!(warning["level"], "WARN");
    assert_eq!(
        warning["fields"]["in_force"],
        r#"{"algorithm":"fixed_window","limit":3,"window_s":60}"#
    );
    assert_eq!(
        warning["fields"]["configured"],
        r#"{"algorithm":"fixed_window","limit":9,"window_s":60}"#
    );
    // It decides on Redis's: 3 a minute. Each response's rate-limit fields
    // are kept for the message: a 200 without them failed open.
    let answers = four_answers(&overridden).await;
    let statuses: Vec<u16> = answers.iter().map(|(status, _)| *status).collect();
    assert_eq!(statuses, [200, 200, 200, 429], "{answers:?}");
    let _ = gateway.child.kill().await;
    let _ = overridden.child.kill().await;
    redis_support::cleanup(&url, &prefix);
}

/// Four requests' statuses, each with its `RateLimit-Policy` and `RateLimit`
/// fields (empty when absent).
async fn four_answers(gateway: &Process) -> Vec<(u16, String)> {
    let mut answers = Vec::new();
    for _ in 0..4 {
        let response = gateway.get("/").await;
        let field = |name: &str| {
            response
                .headers()
                .get(name)
                .and_then(|value| value.to_str().ok())
                .unwrap_or_default()
                .to_owned()
        };
        let fields = format!("{} | {}", field("ratelimit-policy"), field("ratelimit"));
        answers.push((response.status().as_u16(), fields));
    }
    answers
}
