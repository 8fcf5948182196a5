//! Waiting instead of refusing (a route's `delay`, issue #26), the same
//! scenarios in memory (`delay.rs`), on Redis and on a Redis Cluster
//! (`redis_delay.rs`): real clients and a real upstream on loopback, the
//! gateway's limits on its manual clock, which stands still, while the
//! waits run on the wall clock. Only orders and counts are asserted, never
//! durations. Every route is keyed by client IP without API keys, so that a
//! request has one limit (one slot on a cluster).

use std::time::Duration;

use tollgate_test_support::gateway::{Gateway, header};
use tollgate_test_support::loopback::Upstream;

/// The routes of the scenarios, named `name_*`, then `rest` (a `[store]`).
pub(crate) fn routes(upstream: &Upstream, name: &str, rest: &str) -> String {
    let route = |suffix: &str, settings: &str| {
        format!(
            "[[routes]]\nname = \"{name}_{suffix}\"\nprefix = \"/{suffix}\"\nupstream = \"http://{}\"\n\
             api_key = \"none\"\nkey = \"ip\"\n{settings}\n",
            upstream.address
        )
    };
    tollgate_test_support::gateway::config(&format!(
        "{}{}{}{}{rest}",
        // The case: 5 a second, a bucket one deep, 2 s of delay.
        route("queue", "rpm = 300\nburst = 1\ndelay = \"2s\""),
        route("gone", "rpm = 60\nburst = 1\ndelay = \"1s\""),
        route(
            "full",
            "rpm = 60\nburst = 1\ndelay = \"10s\"\nmax_waiting = 2"
        ),
        // Only redis_delay.rs uses it: a turn booked after its client left.
        route("late", "rpm = 60\nburst = 1\ndelay = \"1s\""),
    ))
}

/// Waits (at most 10 s) until no request of `gateway` waits, and nothing
/// is held: no turn booked but neither served nor given back, no slot.
async fn until_none_waits(gateway: &Gateway) {
    gateway.until_nothing_held().await;
}

/// `count` requests to `path` at once; their statuses and `Retry-After`s,
/// in the order they were answered.
async fn at_once(gateway: &Gateway, path: &str, count: usize) -> Vec<(u16, Option<String>)> {
    let (sender, mut receiver) = tokio::sync::mpsc::unbounded_channel();
    for _ in 0..count {
        let request = gateway.client.get(gateway.url(path)).send();
        let sender = sender.clone();
        tokio::spawn(async move {
            let response = request.await.unwrap();
            let answer = (response.status().as_u16(), header(&response, "retry-after"));
            sender.send(answer).unwrap();
        });
    }
    drop(sender);
    let mut answers = Vec::with_capacity(count);
    while let Some(answer) = receiver.recv().await {
        answers.push(answer);
    }
    answers
}

/// Twelve requests at once on 5 a second with a burst of 1 and 2 s of
/// delay: the first eleven pass (at once, then one every 200 ms, up to
/// 2 s), the twelfth is refused at once with `Retry-After: 1` (its turn
/// would be 200 ms past the delay), before any of the waiting ones is
/// served.
pub(crate) async fn twelve_requests_queue_at_the_rate(gateway: &Gateway, upstream: &Upstream) {
    let before = upstream.requests();
    let answers = at_once(gateway, "/queue/x", 12).await;
    let refused: Vec<usize> = (0..answers.len())
        .filter(|at| answers[*at].0 == 429)
        .collect();
    assert_eq!(refused.len(), 1, "{answers:?}");
    assert_eq!(answers[refused[0]].1.as_deref(), Some("1"));
    assert_eq!(
        answers.iter().filter(|(status, _)| *status == 200).count(),
        11
    );
    // Answered at once, it comes before the ten that waited.
    assert!(refused[0] <= 1, "{answers:?}");
    assert_eq!(upstream.requests() - before, 11);
    until_none_waits(gateway).await;
}

/// A client that leaves while it waits gives its turn back: the next
/// request takes it (within the delay), and exactly it (the one after
/// is refused).
pub(crate) async fn a_client_gone_while_it_waits_gives_its_turn_back(
    gateway: &Gateway,
    upstream: &Upstream,
) {
    let before = upstream.requests();
    assert_eq!(
        gateway
            .client
            .get(gateway.url("/gone/x"))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    // Its turn is 1 s away; it leaves after 200 ms.
    let gone = gateway
        .client
        .get(gateway.url("/gone/x"))
        .timeout(Duration::from_millis(200))
        .send()
        .await;
    assert!(gone.unwrap_err().is_timeout());
    until_none_waits(gateway).await;
    // The turn given back, 1 s away: within the delay.
    let next = gateway.client.get(gateway.url("/gone/x")).send();
    let next = tokio::spawn(next);
    // Only one turn was given back: the one after is 2 s away, refused.
    let mut after = None;
    for _ in 0..1000 {
        if gateway.running.requests_waiting() == 1 {
            after = Some(
                gateway
                    .client
                    .get(gateway.url("/gone/x"))
                    .send()
                    .await
                    .unwrap(),
            );
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let after = after.expect("the next request never waited");
    assert_eq!(after.status(), 429);
    assert_eq!(header(&after, "retry-after").as_deref(), Some("1"));
    assert_eq!(next.await.unwrap().unwrap().status(), 200);
    assert_eq!(upstream.requests() - before, 2);
    until_none_waits(gateway).await;
}

/// At most `max_waiting` (2) of a key's requests wait (a place is taken
/// before the turn is booked, so a request past them books nothing): one
/// passes at once and empties the bucket; of four then at once, the two
/// that take the places wait (turns at 1 s and 2 s), and the two without
/// are decided without waiting: refused, told to come back when their
/// turn would be (1 to 3 s, by the order the store sees the four in).
pub(crate) async fn at_most_max_waiting_requests_wait(gateway: &Gateway, upstream: &Upstream) {
    let before = upstream.requests();
    let first = gateway.client.get(gateway.url("/full/x")).send().await;
    assert_eq!(first.unwrap().status(), 200);
    let answers = at_once(gateway, "/full/x", 4).await;
    let mut statuses: Vec<(u16, Option<String>)> = answers;
    statuses.sort();
    assert_eq!(&statuses[..2], [(200, None), (200, None)]);
    for (status, retry_after) in &statuses[2..] {
        assert_eq!(*status, 429);
        let seconds: u64 = retry_after.as_deref().unwrap().parse().unwrap();
        assert!((1..=3).contains(&seconds), "Retry-After: {seconds}");
    }
    assert_eq!(upstream.requests() - before, 3);
    until_none_waits(gateway).await;
}
