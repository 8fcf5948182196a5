//! Routes with several upstream servers (`upstreams`), end to end on
//! loopback: requests in turn, a server that refuses connections skipped
//! for `[upstream] backoff` and tried again after it, every server down, and
//! the `server` label of the failures. Expected values by hand.

use std::net::SocketAddr;
use std::time::Duration;
use tollgate_test_support::gateway::{Gateway, config};
use tollgate_test_support::loopback::Upstream;

/// A gateway whose exempt key `sk_internal` is never limited, with `backoff`
/// and the route `route` on `servers`.
fn servers_config(route: &str, servers: &[SocketAddr], backoff: &str) -> String {
    let urls: Vec<String> = servers
        .iter()
        .map(|server| format!("\"http://{server}\""))
        .collect();
    config(&format!(
        "[limits]\nexempt_keys = [\"sk_internal\"]\n[upstream]\nbackoff = \"{backoff}\"\n\
         [[routes]]\nname = \"{route}\"\nprefix = \"/\"\nupstreams = [{}]\n",
        urls.join(", ")
    ))
}

/// An address where nothing listens: connections to it are refused.
fn closed_port() -> SocketAddr {
    closed_ports::<1>()[0]
}

/// `N` different addresses where nothing listens.
fn closed_ports<const N: usize>() -> [SocketAddr; N] {
    // Bound all at once, so that no two are the same port.
    let listeners: [std::net::TcpListener; N] =
        std::array::from_fn(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap());
    listeners.map(|listener| listener.local_addr().unwrap())
}

#[tokio::test]
async fn requests_go_to_each_server_in_turn() {
    let servers = [
        Upstream::start().await,
        Upstream::start().await,
        Upstream::start().await,
    ];
    let addresses: Vec<SocketAddr> = servers.iter().map(|server| server.address).collect();
    let gateway = Gateway::start(&servers_config("in-turn", &addresses, "10s"), 0).await;
    for _ in 0..9 {
        assert_eq!(gateway.status("/", "sk_internal").await, 200);
    }
    // 9 requests over 3 servers: 3 each.
    let counts: Vec<usize> = servers.iter().map(Upstream::requests).collect();
    assert_eq!(counts, [3, 3, 3]);
    // The turn is back at the first; each gets its own Host.
    for address in &addresses {
        let seen: serde_json::Value = gateway
            .get("/headers", "sk_internal")
            .await
            .json()
            .await
            .unwrap();
        assert_eq!(seen["headers"]["host"], address.to_string());
    }
}

#[tokio::test]
async fn a_server_that_refuses_is_skipped_and_the_next_answers() {
    let closed = closed_port();
    let (second, third) = (Upstream::start().await, Upstream::start().await);
    let addresses = [closed, second.address, third.address];
    let gateway = Gateway::start(&servers_config("skipping", &addresses, "1h"), 0).await;
    for _ in 0..6 {
        assert_eq!(gateway.status("/", "sk_internal").await, 200);
    }
    // Turns 1, 2, 3, 1, 2, 3: the first server's turns go to the second,
    // the first time after its refusal and then without trying it (an hour
    // of back-off): 4 to the second, 2 to the third.
    assert_eq!((second.requests(), third.requests()), (4, 2));
    let closed = closed.to_string();
    let labels = [
        ("route", "skipping"),
        ("server", closed.as_str()),
        ("failure", "unreachable"),
    ];
    assert_eq!(
        gateway
            .route_sample("tollgate_upstream_failures_total", &labels)
            .await,
        Some(1.0)
    );
}

#[tokio::test]
async fn a_server_is_tried_again_after_its_back_off() {
    let first = closed_port();
    let second = Upstream::start().await;
    let gateway = Gateway::start(
        &servers_config("back-again", &[first, second.address], "50ms"),
        0,
    )
    .await;
    assert_eq!(gateway.status("/", "sk_internal").await, 200);
    assert_eq!(second.requests(), 1);
    // The first server comes up; once its back-off is over, its turns are
    // its own again. (Polled: the test does not time the back-off.)
    let first = Upstream::start_at(first).await;
    let mut polls = 0;
    while first.requests() == 0 {
        assert!(polls < 1_000, "the first server was never tried again");
        assert_eq!(gateway.status("/", "sk_internal").await, 200);
        tokio::time::sleep(Duration::from_millis(5)).await;
        polls += 1;
    }
    assert_eq!(first.requests(), 1);
}

#[tokio::test]
async fn with_every_server_down_each_is_tried_once_then_502() {
    let servers = closed_ports::<2>();
    let gateway = Gateway::start(&servers_config("all-down", &servers, "1h"), 0).await;
    for _ in 0..2 {
        let response = gateway.get("/", "sk_internal").await;
        assert_eq!(response.status(), 502);
    }
    // Each request tried both, in back-off or not: 2 refusals each.
    for server in servers {
        let server = server.to_string();
        let labels = [
            ("route", "all-down"),
            ("server", server.as_str()),
            ("failure", "unreachable"),
        ];
        assert_eq!(
            gateway
                .route_sample("tollgate_upstream_failures_total", &labels)
                .await,
            Some(2.0),
            "{server}"
        );
    }
}
