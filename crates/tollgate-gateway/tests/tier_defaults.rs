//! A plan's settings besides its policies (`[limits.tier_defaults.NAME]`)
//! and `[host] max_in_flight` (issue #26) in memory: the scenarios of
//! `tier_scenarios/`, and the settings refused at load.

mod tier_scenarios;

use tollgate_gateway::ServeConfig;
use tollgate_test_support::gateway::Gateway;
use tollgate_test_support::loopback::Upstream;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_waits_up_to_its_tiers_delay() {
    let upstream = Upstream::start().await;
    let gateway = Gateway::start(&tier_scenarios::waiting(&upstream, "td", ""), 0).await;
    tier_scenarios::a_key_waits_up_to_its_tiers_delay(&gateway, &upstream, "td").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tiers_and_the_host_set_the_concurrency_limit_of_routes_without_one() {
    let upstream = Upstream::start().await;
    let gateway = Gateway::start(&tier_scenarios::slots(&upstream, "td", ""), 0).await;
    tier_scenarios::tiers_and_the_host_set_the_concurrency_limit(&gateway, &upstream, "td").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_refused_its_slot_is_given_back() {
    let upstream = Upstream::start().await;
    let gateway = Gateway::start(&tier_scenarios::both(&upstream, "td", ""), 0).await;
    tier_scenarios::a_turn_refused_its_slot_is_given_back(&gateway, &upstream, "td").await;
}

#[test]
fn bad_tier_defaults_are_refused_at_load() {
    let refused = |toml: &str| ServeConfig::from_toml_str(toml).unwrap_err().to_string();
    let pro = "[limits.tiers.pro]\nalgorithm = \"fixed_window\"\nlimit = 5\nwindow_s = 60\n";
    let route = "[[routes]]\nname = \"r\"\nprefix = \"/r\"\nupstream = \"http://h:1\"\n";
    let unknown = refused(&format!(
        "{pro}[limits.tier_defaults.gold]\nmax_in_flight = 2\n{route}"
    ));
    assert!(
        unknown.contains(
            "invalid tier_defaults.gold: there is no such tier in limits.tiers (`default` is the \
             default plan)"
        ),
        "{unknown}"
    );
    // Shadow mode observes a limit; a delay acts on it.
    let shadowed = refused(&format!(
        "{pro}[limits.tier_defaults.pro]\ndelay = \"1s\"\n[refusal]\nshadow_tiers = [\"pro\"]\n\
         {route}"
    ));
    assert!(
        shadowed.ends_with(
            "limits.tier_defaults.pro.delay makes requests wait for their limits, and \
             refusal.shadow_tiers (pro) only observes them: remove one"
        ),
        "{shadowed}"
    );
    let everywhere = refused(&format!(
        "{pro}[limits.tier_defaults.default]\ndelay = \"1s\"\n[refusal]\nshadow = true\n{route}"
    ));
    assert!(
        everywhere.ends_with(
            "limits.tier_defaults.default.delay makes requests wait for their limits, and \
             refusal.shadow only observes them: remove one"
        ),
        "{everywhere}"
    );
    let host = refused(&format!("[host]\nmax_in_flight = 0\n{route}"));
    assert!(
        host.ends_with(
            "host.max_in_flight must be 1 to 4294967296 (2^32), the requests of one key in \
             flight at once"
        ),
        "{host}"
    );
    // max_waiting needs a delay to apply to: the route's, or a tier's.
    assert_eq!(
        refused(&format!("{route}max_waiting = 5\n")),
        "route r (/r): max_waiting applies to a delay, the route's or a tier's in \
         limits.tier_defaults, and neither is set: set one too"
    );
    let tier_delay = format!("{pro}[limits.tier_defaults.pro]\ndelay = \"1s\"\n{route}");
    ServeConfig::from_toml_str(&format!("{tier_delay}max_waiting = 5\n")).unwrap();
    // A route that never waits for a tier's delay: in shadow mode, or
    // reading no keys.
    for (never, why) in [
        (
            "rpm = 60\nshadow = true\n",
            "does not apply to a route in shadow mode, which never waits",
        ),
        (
            "api_key = \"none\"\nrpm = 60\n",
            "does not apply on a route with api_key = \"none\", which reads no key",
        ),
    ] {
        let error = refused(&format!("{tier_delay}{never}max_waiting = 5\n"));
        assert!(
            error.starts_with(
                "route r (/r): max_waiting applies to a delay, and this route has none of its \
                 own: a tier's delay in limits.tier_defaults "
            ) && error.ends_with(why),
            "{never}: {error}"
        );
    }
}
