//! The client IP a route budget keyed by IP sees: `X-Forwarded-For` only
//! from trusted proxies, one bucket per client whatever the spelling of its
//! address, IPv6 clients grouped by their /64. Driven through
//! `tower::ServiceExt` with a manual clock; every expected value is worked
//! out by hand in the comments.

mod support;

use http::StatusCode;
use tollgate_core::ManualClock;
use tollgate_tower::{Budget, ClientIpResolver, HostLimits, KeySelector, RouteLimitLayer};

use support::{Backend, from, status, with_header};

const PEER: &str = "192.0.2.7:5000";

fn limits(clock: &ManualClock) -> HostLimits {
    HostLimits::builder().clock(clock.clone()).build().unwrap()
}

/// A route allowing one request a minute per client IP.
fn one_per_ip(limits: &HostLimits) -> RouteLimitLayer {
    limits
        .route("ip")
        .budget(Budget::new(60, 1).unwrap())
        .unwrap()
        .key(KeySelector::Ip)
}

#[tokio::test]
async fn x_forwarded_for_from_an_untrusted_peer_is_ignored() {
    let clock = ManualClock::new(0);
    let service = Backend::default().wrapped(&one_per_ip(&limits(&clock)));
    assert_eq!(
        status(
            &service,
            with_header(from(PEER), "x-forwarded-for", "203.0.113.1")
        )
        .await,
        StatusCode::OK
    );
    // A new spoofed address each time does not buy a new bucket.
    for spoofed in ["203.0.113.2", "203.0.113.3", "for=203.0.113.4"] {
        let request = with_header(from(PEER), "x-forwarded-for", spoofed);
        assert_eq!(
            status(&service, request).await,
            StatusCode::TOO_MANY_REQUESTS
        );
        let request = with_header(from(PEER), "forwarded", spoofed);
        assert_eq!(
            status(&service, request).await,
            StatusCode::TOO_MANY_REQUESTS
        );
    }
}

#[tokio::test]
async fn forwarded_addresses_from_a_trusted_proxy_name_the_client() {
    let clock = ManualClock::new(0);
    let resolver = ClientIpResolver::new(["10.0.0.0/8".parse().unwrap()], 64);
    let limits = HostLimits::builder()
        .clock(clock.clone())
        .client_ip(resolver)
        .build()
        .unwrap();
    let service = Backend::default().wrapped(&one_per_ip(&limits));
    let proxied = |chain: &str| with_header(from("10.0.0.1:443"), "x-forwarded-for", chain);
    // The right-most address that is not a trusted proxy: 203.0.113.9.
    assert_eq!(
        status(&service, proxied("198.51.100.1, 203.0.113.9, 10.0.0.2")).await,
        StatusCode::OK
    );
    assert_eq!(
        status(&service, proxied("203.0.113.9")).await,
        StatusCode::TOO_MANY_REQUESTS
    );
    // The client may prepend anything; it does not move the key.
    assert_eq!(
        status(&service, proxied("1.1.1.1, 203.0.113.9, 10.0.0.7")).await,
        StatusCode::TOO_MANY_REQUESTS
    );
    assert_eq!(
        status(&service, proxied("203.0.113.10")).await,
        StatusCode::OK
    );
}

#[tokio::test]
async fn the_two_spellings_of_one_ipv4_client_share_a_bucket() {
    let clock = ManualClock::new(0);
    let service = Backend::default().wrapped(&one_per_ip(&limits(&clock)));
    assert_eq!(
        status(&service, from("192.0.2.7:1000")).await,
        StatusCode::OK
    );
    assert_eq!(
        status(&service, from("[::ffff:192.0.2.7]:1000")).await,
        StatusCode::TOO_MANY_REQUESTS
    );
}

#[tokio::test]
async fn ipv6_clients_are_grouped_by_their_64() {
    let clock = ManualClock::new(0);
    let service = Backend::default().wrapped(&one_per_ip(&limits(&clock)));
    assert_eq!(
        status(&service, from("[2001:db8:1:2::1]:1")).await,
        StatusCode::OK
    );
    assert_eq!(
        status(&service, from("[2001:db8:1:2:ffff::9]:1")).await,
        StatusCode::TOO_MANY_REQUESTS
    );
    assert_eq!(
        status(&service, from("[2001:db8:1:3::1]:1")).await,
        StatusCode::OK
    );
}
