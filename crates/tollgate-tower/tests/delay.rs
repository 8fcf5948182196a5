//! The tower layer's share of issue #26 part 4: a route's delay. A request
//! its budget would refuse waits for its turn (core's
//! `Store::reserve_units`) on a tokio timer, then is called; one whose turn
//! is further is refused with `Retry-After` its wait less the delay; a
//! request dropped while it waits gives its turn back. The store's clock is
//! a manual one that stands still; tokio's time is paused, so a wait
//! advances it exactly, without sleeping. Expected values by hand.

mod support;

use std::time::Duration;

use http::StatusCode;
use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use support::{Backend, from, header, send};
use tokio::time::Instant;
use tollgate_core::ManualClock;
use tollgate_tower::{Budget, DELAYED_METRIC, HostLimits, MAX_DELAY};

#[tokio::test(start_paused = true)]
async fn requests_wait_their_turn_and_a_request_gone_gives_its_turn_back() {
    let clock = ManualClock::new(0);
    let host = HostLimits::builder().clock(clock.clone()).build().unwrap();
    // One token a second, a bucket one deep, up to 2 s of waiting.
    let layer = host
        .route("tw_delay")
        .budget(Budget::new(60, 1).unwrap())
        .unwrap()
        .delay(Duration::from_secs(2))
        .unwrap();
    let backend = Backend::default();
    let service = backend.wrapped(&layer);
    let request = || from("192.0.2.9:5000");
    let start = Instant::now();
    // At once; then at its turn 1 s later; then 2 s later (the store's
    // clock stands still: the second's turn was at 1 s, the third's at 2 s).
    assert_eq!(send(&service, request()).await.status(), StatusCode::OK);
    assert_eq!(start.elapsed(), Duration::ZERO);
    assert_eq!(send(&service, request()).await.status(), StatusCode::OK);
    assert_eq!(start.elapsed(), Duration::from_secs(1));
    assert_eq!(send(&service, request()).await.status(), StatusCode::OK);
    assert_eq!(start.elapsed(), Duration::from_secs(3));
    // The fourth's turn is at 3 s, 1 s past the delay: refused at once.
    let refused = send(&service, request()).await;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(header(&refused, "retry-after"), Some("1"));
    assert_eq!(start.elapsed(), Duration::from_secs(3));
    assert_eq!(backend.calls(), 3);
    // A second later (the store's clock too) one waits 2 s, its turn at 3 s;
    // dropped after 500 ms, it gives its turn back.
    clock.advance_by("1s").unwrap();
    let gone = tokio::time::timeout(Duration::from_millis(500), send(&service, request())).await;
    assert!(gone.is_err(), "still waiting when dropped");
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    // So the next takes that turn (2 s away), not the one after (3 s away,
    // which would be refused).
    let before = Instant::now();
    assert_eq!(send(&service, request()).await.status(), StatusCode::OK);
    assert_eq!(before.elapsed(), Duration::from_secs(2));
    assert_eq!(backend.calls(), 4);
}

#[tokio::test(start_paused = true)]
async fn at_most_max_waiting_requests_of_a_key_wait_and_the_served_are_counted() {
    // The runtime is this thread's: the recorder sees every count.
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _recording = metrics::set_default_local_recorder(&recorder);
    let clock = ManualClock::new(0);
    let host = HostLimits::builder().clock(clock.clone()).build().unwrap();
    // One token a second, a bucket one deep, up to 10 s of waiting, at most
    // two requests of a key waiting at once.
    let layer = host
        .route("tw_queue")
        .budget(Budget::new(60, 1).unwrap())
        .unwrap()
        .delay(Duration::from_secs(10))
        .unwrap()
        .max_waiting(std::num::NonZeroU64::new(2).unwrap());
    let backend = Backend::default();
    let service = backend.wrapped(&layer);
    let request = || from("192.0.2.9:5000");
    assert_eq!(send(&service, request()).await.status(), StatusCode::OK);
    let start = Instant::now();
    // Three at once: two take the places and their turns (1 s and 2 s);
    // the third finds no place, may not wait, and is refused with its turn
    // (3 s away) as Retry-After, booking nothing.
    let (first, second, third) = tokio::join!(
        send(&service, request()),
        send(&service, request()),
        send(&service, request())
    );
    assert_eq!(first.status(), StatusCode::OK);
    assert_eq!(second.status(), StatusCode::OK);
    assert_eq!(third.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(header(&third, "retry-after"), Some("3"));
    assert_eq!(start.elapsed(), Duration::from_secs(2));
    assert_eq!(host.requests_waiting(), 0);
    // The third booked nothing: on the store's clock, which stands at 0,
    // the next turn is the one at 3 s (not 4 s), within the delay, and the
    // places are free again.
    let before = Instant::now();
    assert_eq!(send(&service, request()).await.status(), StatusCode::OK);
    assert_eq!(before.elapsed(), Duration::from_secs(3));
    assert_eq!(backend.calls(), 4);
    let delayed: Vec<_> = snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .filter(|(key, ..)| key.key().name() == DELAYED_METRIC)
        .map(|(key, _, _, value)| {
            let labels: Vec<String> = key
                .key()
                .labels()
                .map(|label| format!("{}={}", label.key(), label.value()))
                .collect();
            (labels, value)
        })
        .collect();
    assert_eq!(
        delayed,
        [(
            vec!["plugin=tollgate".to_owned(), "route=tw_queue".to_owned()],
            DebugValue::Counter(3)
        )]
    );
}

#[test]
fn a_delay_over_an_hour_is_refused() {
    let host = HostLimits::builder().build().unwrap();
    let error = host
        .route("tw_d")
        .delay(MAX_DELAY + Duration::from_secs(1))
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "a delay must be at most 1h, how long a request may wait for its turn; got 3601s"
    );
    assert!(host.route("tw_d").delay(MAX_DELAY).is_ok());
}
