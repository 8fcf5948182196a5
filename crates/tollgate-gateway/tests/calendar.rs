//! `tollgate serve` end to end with calendar quotas (issue #29): a plan of
//! 10 per second and 3 per month in Europe/Berlin, all or nothing, and a
//! route whose own budget is 2 per Berlin day; the month's end crossed on
//! the gateway's manual clock. In memory, and on Redis (`REDIS_URL`; ignored
//! without it). Expected values by hand: Berlin's March 2025 ends at
//! 2025-03-31T22:00:00Z (1743458400, CEST), its April lasts 30 days to
//! 2025-04-30T22:00:00Z (1746050400), its 1st of April to
//! 2025-04-01T22:00:00Z (1743544800) (each checked with GNU `date -u -d`).

use tollgate_test_support::gateway::{Gateway, config, header};
use tollgate_test_support::loopback::Upstream;
use tollgate_test_support::redis as redis_support;

/// Two seconds before the end of March in Berlin.
const START_S: u64 = 1_743_458_400 - 2;

fn calendar_config(upstream: &Upstream, store: &str) -> String {
    config(&format!(
        "{store}\
         [limits]\nidle_eviction_s = 3000000\n\
         [[limits.default_policy]]\nname = \"second\"\nalgorithm = \"fixed_window\"\nlimit = 10\nwindow_s = 1\n\
         [[limits.default_policy]]\nname = \"month\"\nalgorithm = \"fixed_window\"\nlimit = 3\n\
         window = \"month\"\ntime_zone = \"Europe/Berlin\"\n\
         [[routes]]\nname = \"daily\"\nprefix = \"/daily\"\nupstream = \"http://{0}\"\n\
         limit = 2\nwindow = \"day\"\ntime_zone = \"Europe/Berlin\"\n\
         [[routes]]\nname = \"api\"\nprefix = \"/\"\nupstream = \"http://{0}\"\n",
        upstream.address
    ))
}

/// Status, `RateLimit` and `Retry-After` of one request.
async fn seen(gateway: &Gateway, path: &str, key: &str) -> (u16, Option<String>, Option<String>) {
    let response = gateway.get(path, key).await;
    (
        response.status().as_u16(),
        header(&response, "ratelimit"),
        header(&response, "retry-after"),
    )
}

async fn the_month_ends_at_berlin_midnight(gateway: &Gateway) {
    let policy = gateway.get("/", "sk_month").await;
    assert_eq!(policy.status(), 200);
    assert_eq!(
        header(&policy, "ratelimit-policy").as_deref(),
        Some("\"second\";q=10;w=1, \"month\";q=3;w=2678400")
    );
    assert_eq!(
        header(&policy, "ratelimit").as_deref(),
        Some("\"month\";r=2;t=2")
    );
    for remaining in [1, 0] {
        assert_eq!(
            seen(gateway, "/", "sk_month").await,
            (200, Some(format!("\"month\";r={remaining};t=2")), None)
        );
    }
    // March is used up; April begins in 2 s.
    assert_eq!(
        seen(gateway, "/", "sk_month").await,
        (429, Some("\"month\";r=0;t=2".into()), Some("2".into()))
    );
    gateway.clock.advance_by("2s").unwrap();
    // April: 30 days to its end, 2 units left after this one.
    assert_eq!(
        seen(gateway, "/", "sk_month").await,
        (200, Some("\"month\";r=2;t=2592000".into()), None)
    );
}

async fn a_route_budget_counts_berlin_days(gateway: &Gateway) {
    // At 2025-03-31T22:00:00Z: the 1st of April in Berlin, to 22:00Z on
    // the 1st: 86,400 s.
    let (first, ..) = seen(gateway, "/daily/a", "sk_day").await;
    let (second, ..) = seen(gateway, "/daily/b", "sk_day").await;
    assert_eq!((first, second), (200, 200));
    let refused = gateway.get("/daily/c", "sk_day").await;
    assert_eq!(refused.status(), 429);
    assert_eq!(header(&refused, "retry-after").as_deref(), Some("86400"));
    // The plan's month counted the two allowed only (a refused request uses
    // nothing): the key's third request of April, on another route, passes
    // and uses the month up.
    assert_eq!(
        seen(gateway, "/", "sk_day").await,
        (200, Some("\"month\";r=0;t=2592000".into()), None)
    );
    // A Berlin day later the route's budget is fresh, but the month is
    // not: refused until April's end, 29 days on.
    gateway.clock.advance_by("86400s").unwrap();
    let refused = gateway.get("/daily/d", "sk_day").await;
    assert_eq!(refused.status(), 429);
    assert_eq!(header(&refused, "retry-after").as_deref(), Some("2505600"));
}

#[tokio::test]
async fn in_memory_calendar_quotas_end_at_local_midnight() {
    let upstream = Upstream::start().await;
    let gateway = Gateway::start(&calendar_config(&upstream, ""), START_S).await;
    the_month_ends_at_berlin_midnight(&gateway).await;
    a_route_budget_counts_berlin_days(&gateway).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(has_redis), ignore = "set REDIS_URL=redis://127.0.0.1:6379 to run")]
async fn on_redis_calendar_quotas_end_at_local_midnight() {
    let url = redis_support::require_redis_url();
    let prefix = redis_support::prefix("gateway-calendar");
    let upstream = Upstream::start().await;
    let store = format!(
        "[store]\nurl = \"{url}\"\nprefix = \"{prefix}\"\ntimeout = \"2s\"\ntime = \"local\"\n"
    );
    let config =
        tollgate_gateway::ServeConfig::from_toml_str(&calendar_config(&upstream, &store)).unwrap();
    let gateway = Gateway::start_on_redis(config, START_S, &url, &prefix).await;
    the_month_ends_at_berlin_midnight(&gateway).await;
    a_route_budget_counts_berlin_days(&gateway).await;
    redis_support::cleanup(&url, &prefix);
}

#[test]
fn check_config_describes_calendar_quotas() {
    let upstream = "127.0.0.1:9";
    let lines = tollgate_gateway::ServeConfig::from_toml_str(&config(&format!(
        "[limits]\nidle_eviction_s = 3000000\n\
         [[limits.default_policy]]\nname = \"second\"\nalgorithm = \"fixed_window\"\nlimit = 10\nwindow_s = 1\n\
         [[limits.default_policy]]\nname = \"month\"\nalgorithm = \"fixed_window\"\nlimit = 3\n\
         window = \"month\"\ntime_zone = \"Europe/Berlin\"\n\
         [[routes]]\nname = \"weekly\"\nprefix = \"/\"\nupstream = \"http://{upstream}\"\n\
         limit = 2\nwindow = \"week\"\nweek_starts = \"sunday\"\n"
    )))
    .unwrap()
    .summary();
    let text = lines.join("\n");
    assert!(
        text.contains(
            "second: fixed_window 10 per 1 s and month: fixed_window 3 per month (Europe/Berlin)"
        ),
        "{text}"
    );
    assert!(text.contains("2 a week from sunday (UTC)"), "{text}");
}

#[test]
fn bad_calendar_settings_are_refused_at_load_naming_the_setting() {
    let upstream = "[[routes]]\nprefix = \"/\"\nupstream = \"http://127.0.0.1:9\"\n";
    for (settings, says) in [
        (
            "[limits.default_policy]\nalgorithm = \"fixed_window\"\nlimit = 5\nwindow = \"month\"\ntime_zone = \"Europe/Atlantis\"\n",
            "time_zone \"Europe/Atlantis\" is not an IANA time zone name",
        ),
        (
            "[[routes]]\nprefix = \"/q\"\nupstream = \"http://127.0.0.1:9\"\nrpm = 60\nwindow = \"month\"\n",
            "a calendar window (window = \"month\") takes limit, not rpm",
        ),
        (
            "[[routes]]\nprefix = \"/q\"\nupstream = \"http://127.0.0.1:9\"\nlimit = 60\nwindow = \"day\"\ntime_zone = \"Nowhere\"\n",
            "time_zone \"Nowhere\" is not an IANA time zone name",
        ),
    ] {
        let error =
            tollgate_gateway::ServeConfig::from_toml_str(&config(&format!("{settings}{upstream}")))
                .unwrap_err()
                .to_string();
        assert!(error.contains(says), "{settings}: {error}");
    }
}
