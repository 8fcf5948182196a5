//! The script calls' tests: the acquire script on a real Redis (its
//! deadlines, its checks of malformed arguments) and the reading of every
//! shape of reply.

use std::time::Duration;

use tollgate_core::Policy;

use super::*;
use crate::connection::Target;
use crate::keys::Space;
use crate::protocol::{FIXED_WINDOW, REDIS_TIME};

/// A connection to the Redis at `REDIS_URL`. The tests using it are
/// ignored without it (the build script's `has_redis`); one that runs
/// fails when it is not set (under `CI=true`).
fn connection() -> Connection {
    let url = std::env::var("REDIS_URL")
        .ok()
        .filter(|url| !url.is_empty())
        .expect("REDIS_URL is not set: under CI=true the call tests need a Redis");
    Connection::open(&Target::Standalone(url), Duration::from_secs(2))
        .unwrap()
        .0
}

#[tokio::test]
#[cfg_attr(not(has_redis), ignore = "set REDIS_URL=redis://127.0.0.1:6379 to run")]
async fn a_request_past_its_deadline_does_nothing_and_a_write_needs_one() {
    let mut connection = connection();
    let script = crate::script::acquire();
    let clock = RedisClock::new(Duration::from_millis(50));
    let prefix = format!("tollgate-test-{}-call", std::process::id());
    let names = Arc::new(KeyNames::new(&prefix, Space::Policy, "deadline", None));
    let policy = Policy::fixed_window(5, 60).unwrap();
    let rule = ScriptRule::new(policy, "p-deadline".into()).unwrap();
    let limit = ScriptLimit {
        names: Arc::clone(&names),
        tier: None,
        rule: Arc::new(rule),
        units: 1,
    };
    let take = Request {
        limits: vec![limit.clone()],
        write: true,
        max_wait: None,
    };
    let look = Request {
        limits: vec![limit.with_units(0)],
        write: false,
        max_wait: None,
    };
    // 2100-01-01T00:00:10Z: the decisions' time, not the deadlines'.
    let now = "4102444810000000";
    let ttl = 600_000_000;
    // One caller gave up a second ago, one waits 5 s more: the first
    // takes nothing, the second one unit, and a look sees that unit.
    let gone = Instant::now() - Duration::from_secs(1);
    let waiting = Instant::now() + Duration::from_secs(5);
    let calls = [(&take, gone), (&take, waiting), (&look, waiting)];
    let replies = decide(&mut connection, &script, &clock, now, ttl, &calls)
        .await
        .unwrap();
    let remaining = |reply: &Reply| match reply {
        Reply::Decided(outcomes) => (outcomes[0].allowed, outcomes[0].remaining),
        other => panic!("{other:?}"),
    };
    assert_eq!(replies[0], Reply::Expired);
    assert_eq!(remaining(&replies[1]), (1, 4));
    assert_eq!(remaining(&replies[2]), (0, 4));
    // No deadline: a write is refused, a read is answered.
    let replies = invoke(&mut connection, &script, now, ttl, &[&take, &look])
        .await
        .unwrap();
    let refused = Reply::Failed("a request that writes needs a deadline".into());
    assert_eq!(replies[0], refused);
    assert_eq!(remaining(&replies[1]), (0, 4));
    let _: i64 = redis::cmd("DEL")
        .arg(&names.state)
        .query_async(&mut connection)
        .await
        .unwrap();
}

#[tokio::test]
#[cfg_attr(not(has_redis), ignore = "set REDIS_URL=redis://127.0.0.1:6379 to run")]
async fn a_request_running_past_the_arguments_fails_with_those_after_it() {
    let mut connection = connection();
    let script = crate::script::acquire();
    let prefix = format!("tollgate-test-{}-malformed", std::process::id());
    let first = format!("{prefix}:first");
    let second = format!("{prefix}:second");
    // Redis's time; one rule, a fixed window of 100 a minute (version v).
    let head = [
        REDIS_TIME,
        "0",
        "1",
        FIXED_WINDOW,
        "100",
        "60000000",
        "0",
        "v",
    ];
    // A request of one unit of one limit, a deadline far ahead, no wait:
    // limits, write, deadline, wait, then rule, units, tier per limit.
    let whole = ["1", WRITE, "9000000000000000", NO_WAIT, "1", "1", NO_TIER];
    // Three requests: the first whole, the second claiming more limits
    // than the arguments hold (read as it stood, a count like a
    // deadline's looped for hours with Redis blocked), the third whole.
    for claimed in ["4", "9000000000000000", "x", "nan", "1.5", "-1"] {
        let mut invocation = script.prepare_invoke();
        invocation.key(&first).key(&second).key(&second);
        invocation.arg(&head[..]).arg("3").arg(&whole[..]);
        invocation.arg(claimed).arg(&whole[1..]).arg(&whole[..]);
        let reply: Value = invocation.invoke_async(&mut connection).await.unwrap();
        let (_, replies) = read_replies(&reply, &[1, 1, 1]).expect(claimed);
        // The first stands (the fixed window of 100 counts one more each
        // time), the second and the third fail, deciding nothing.
        let failed = Reply::Failed("malformed request: its limits run past the arguments".into());
        assert_eq!(replies.len(), 3, "{claimed}");
        assert!(
            matches!(&replies[0], Reply::Decided(outcomes) if outcomes[0].allowed == 1),
            "{claimed}: {:?}",
            replies[0]
        );
        assert_eq!(replies[1..], [failed.clone(), failed], "{claimed}");
    }
    let taken: Vec<Option<String>> = redis::cmd("MGET")
        .arg(&first)
        .arg(&second)
        .query_async(&mut connection)
        .await
        .unwrap();
    assert!(taken[0].is_some());
    assert_eq!(taken[1], None, "nothing read or written for the second key");
    // Counts of rules or of requests that are not counts or run past the
    // arguments (a request has at least four): the call decides nothing.
    let requests = "its count of requests does not fit its arguments";
    let rules = "its count of rules does not fit its arguments";
    let calls = [
        ("1", "many", requests),
        ("1", "2", requests),
        ("1", "9000000000000000", requests),
        ("1", "nan", requests),
        ("1", "0.5", requests),
        ("9000000000000000", "1", rules),
        ("nan", "1", rules),
        ("0.5", "1", rules),
    ];
    for (rule_count, request_count, message) in calls {
        let mut head = head;
        head[2] = rule_count;
        let mut invocation = script.prepare_invoke();
        invocation
            .key(&second)
            .arg(&head[..])
            .arg(request_count)
            .arg(&whole[..]);
        let reply: Result<Value, _> = invocation.invoke_async(&mut connection).await;
        let error = reply.expect_err(message).to_string();
        assert!(
            error.contains(&format!("malformed call: {message}")),
            "{rule_count} rules, {request_count} requests: {error}"
        );
    }
    let _: i64 = redis::cmd("DEL")
        .arg(&first)
        .arg(&second)
        .query_async(&mut connection)
        .await
        .unwrap();
}

#[test]
fn reads_every_shape_of_reply() {
    let reply = Value::Array(vec![
        // Redis's TIME when the call ran.
        Value::Int(4_102_444_800_000_123),
        Value::Int(0),
        Value::BulkString(b"1800000000000000 1 4 0 60000000".to_vec()),
        Value::Int(1),
        Value::Int(2),
        Value::BulkString(b"pro".to_vec()),
        Value::Int(2),
        Value::BulkString(b"WRONGTYPE".to_vec()),
        Value::Int(3),
    ]);
    assert_eq!(
        read_replies(&reply, &[1, 2, 1, 2]),
        Some((
            4_102_444_800_000_123,
            vec![
                Reply::Decided(vec![Outcome {
                    counted_at: 1_800_000_000_000_000,
                    allowed: 1,
                    remaining: 4,
                    retry_after: 0,
                    reset_after: 60_000_000
                }]),
                Reply::Tier {
                    index: 1,
                    tier: "pro".into()
                },
                Reply::Failed("WRONGTYPE".into()),
                Reply::Expired,
            ]
        ))
    );
    // Too short, too long, an unknown status, a negative number, no
    // time.
    assert_eq!(read_replies(&reply, &[2, 2, 1, 2]), None);
    assert_eq!(read_replies(&reply, &[1, 2, 1]), None);
    let unknown = Value::Array(vec![Value::Int(7), Value::Int(4)]);
    assert_eq!(read_replies(&unknown, &[1]), None);
    let negative = Value::Array(vec![Value::Int(-7), Value::Int(3)]);
    assert_eq!(read_replies(&negative, &[1]), None);
    // Outcomes: too few or too many numbers, a sign, a doubled or a
    // trailing space, past u64, numbers sent as numbers.
    // One request of `limits` limits, decided, its outcomes `text`.
    let decided_of = |text: &[u8], limits: usize| {
        let reply = Value::Array(vec![
            Value::Int(7),
            Value::Int(0),
            Value::BulkString(text.to_vec()),
        ]);
        read_replies(&reply, &[limits]).map(|(_, replies)| replies)
    };
    let decided = |text: &[u8]| decided_of(text, 1);
    let outcome = Outcome {
        counted_at: 5,
        allowed: 1,
        remaining: 0,
        retry_after: 18_446_744_073_709_551_615,
        reset_after: 9,
    };
    assert_eq!(
        decided(b"5 1 0 18446744073709551615 9"),
        Some(vec![Reply::Decided(vec![outcome])])
    );
    for bad in [
        b"5 1 0 9".as_slice(),
        b"5 1 0 9 9 9",
        b"5 1 -0 9 9",
        b"5 1  0 9 9",
        b"5 1 0 9 9 ",
        b"5 1 0 18446744073709551616 9",
        b"5 1 0 9 x",
        b"",
    ] {
        assert_eq!(decided(bad), None, "{}", String::from_utf8_lossy(bad));
    }
    // A request of no limits: an empty text, and nothing else.
    assert_eq!(decided_of(b"", 0), Some(vec![Reply::Decided(vec![])]));
    assert_eq!(decided_of(b"5 1 0 9 9", 0), None);
    let numbers = Value::Array(vec![
        Value::Int(7),
        Value::Int(0),
        Value::Int(5),
        Value::Int(1),
        Value::Int(0),
        Value::Int(0),
        Value::Int(9),
    ]);
    assert_eq!(read_replies(&numbers, &[1]), None);
    assert_eq!(read_replies(&Value::Array(vec![]), &[]), None);
    assert_eq!(read_replies(&Value::Int(3), &[1]), None);
}
