//! A route's concurrency limit (`max_in_flight`, issue #26), in memory: the
//! scenarios of `in_flight_scenarios/` (as `redis_in_flight.rs` runs them
//! on Redis), the gateway in process on a manual clock, and the settings
//! refused at load.

mod in_flight_scenarios;

use tollgate_test_support::gateway::Gateway;
use tollgate_test_support::loopback::Upstream;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slots_are_held_until_responses_end_in_memory() {
    let upstream = Upstream::start().await;
    let config = in_flight_scenarios::routes(&upstream, "if_memory", "");
    let gateway = Gateway::start(&config, 0).await;
    in_flight_scenarios::a_key_holds_at_most_max_in_flight(&gateway, &upstream, "if_memory", None)
        .await;
    in_flight_scenarios::slots_and_rates_are_all_or_nothing(&gateway, &upstream, "if_memory").await;
    in_flight_scenarios::a_client_gone_mid_body_gives_its_slot_back(&gateway).await;
    in_flight_scenarios::keyless_requests_count_per_client_ip(&gateway, &upstream).await;
    in_flight_scenarios::a_concurrency_refusal_has_the_route_s_status(
        &gateway,
        &upstream,
        "if_memory",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_response_that_ends_badly_gives_its_slot_back_in_memory() {
    let upstream = Upstream::start().await;
    let config = in_flight_scenarios::ending_routes(&upstream, "if_memory", "");
    let gateway = Gateway::start(&config, 0).await;
    in_flight_scenarios::a_response_that_ends_badly_gives_its_slot_back(&gateway, &upstream).await;
}

#[test]
fn bad_concurrency_settings_are_refused_at_load() {
    let refused = |route: &str, rest: &str| {
        tollgate_gateway::ServeConfig::from_toml_str(&format!(
            "{rest}\n[[routes]]\nname = \"r\"\nprefix = \"/r\"\nupstream = \"http://h:1\"\n{route}"
        ))
        .unwrap_err()
        .to_string()
    };
    assert_eq!(
        refused("max_in_flight = 0", ""),
        "route r (/r): max_in_flight must be 1 to 4294967296 (2^32), the requests of one key in \
         flight at once"
    );
    assert_eq!(
        refused("in_flight_key = \"ip\"", ""),
        "route r (/r): in_flight_key applies to max_in_flight: set it too"
    );
    assert!(
        refused("max_in_flight = 1\nin_flight_key = \"principal\"", "")
            .contains("in_flight_key must be \"api_key\", \"ip\", \"tenant\" or \"header:NAME\"")
    );
    assert!(
        refused("max_in_flight = 1\nin_flight_key = \"cookie\"", "")
            .contains("in_flight_key must be \"api_key\"")
    );
    assert!(
        refused("", "[store]\nlease_ttl = \"500ms\"")
            .contains("store.lease_ttl must be at least 1s")
    );
}
