//! A calendar window decided on Redis's clock while the caller's clock is
//! on the other side of a boundary (tests only, against the Redis at
//! `REDIS_URL`; ignored without it). The caller sends the boundaries core
//! computed around its own time (`ScriptRule::fields_around`); the script's
//! own now picks the period, so the two clocks agree on every request as
//! long as they are less than a period apart, and a call whose clocks are
//! further apart fails rather than count in a period neither named.

use redis::Value;
use tollgate_core::{Calendar, CalendarPeriod, Policy};

use crate::plans::ScriptRule;
use crate::protocol::{NO_TIER, NO_WAIT, WRITE};

/// 2100-01-01T00:00:00Z in microseconds: the boundary between two UTC days.
const MIDNIGHT: u64 = 4_102_444_800_000_000;
const SECOND: u64 = 1_000_000;
const DAY: u64 = 86_400 * SECOND;

fn connection() -> redis::Connection {
    let url = std::env::var("REDIS_URL")
        .ok()
        .filter(|url| !url.is_empty())
        .expect("REDIS_URL is not set: under CI=true the calendar tests need a Redis");
    redis::Client::open(url).unwrap().get_connection().unwrap()
}

/// One unit of `rule` on `key`, the boundaries computed around `around`,
/// decided by the script at `now` (both µs): the reply after Redis's TIME.
fn one_unit(
    connection: &mut redis::Connection,
    rule: &ScriptRule,
    key: &str,
    around: u64,
    now: u64,
) -> Vec<Value> {
    let script = crate::script::acquire();
    let mut invocation = script.prepare_invoke();
    invocation.arg(now.to_string()).arg(600_000_000u64).arg(1);
    invocation.arg(&rule.fields_around(around, 0));
    // One request of one limit: write, a deadline far ahead, no wait; rule
    // 1, one unit, no tier.
    invocation
        .arg(1)
        .arg(1)
        .arg(WRITE)
        .arg(u64::MAX / 2)
        .arg(NO_WAIT)
        .key(key)
        .arg(1)
        .arg(1)
        .arg(NO_TIER);
    let reply: Vec<Value> = invocation.invoke(connection).unwrap();
    reply[1..].to_vec()
}

/// The outcome numbers of a decided reply: counted_at, allowed, remaining,
/// retry_after, reset_after (µs).
fn outcome(reply: &[Value]) -> Vec<u64> {
    match reply {
        [Value::Int(0), Value::BulkString(text)] => std::str::from_utf8(text)
            .unwrap()
            .split(' ')
            .map(|number| number.parse().unwrap())
            .collect(),
        other => panic!("not decided: {other:?}"),
    }
}

#[test]
#[cfg_attr(not(has_redis), ignore = "set REDIS_URL=redis://127.0.0.1:6379 to run")]
fn redis_clock_picks_the_period_whatever_side_the_caller_is_on() {
    let mut connection = connection();
    let day = Calendar::new(CalendarPeriod::Day, "UTC", None).unwrap();
    let rule = ScriptRule::new(Policy::calendar(1, day).unwrap(), "test-calendar".into()).unwrap();
    let key = format!("tollgate-test-{}-calendar", std::process::id());
    let _: () = redis::cmd("DEL").arg(&key).query(&mut connection).unwrap();
    // Half a second before midnight, both clocks agree: the one unit of
    // 2099-12-31 is taken.
    let before = MIDNIGHT - SECOND / 2;
    assert_eq!(
        outcome(&one_unit(&mut connection, &rule, &key, before, before)),
        [MIDNIGHT - 1, 1, 0, 0, SECOND / 2]
    );
    // The caller's clock is a second ahead, already in 2100; Redis's is
    // still in 2099: the request counts in 2099, whose unit is gone.
    assert_eq!(
        outcome(&one_unit(
            &mut connection,
            &rule,
            &key,
            MIDNIGHT + SECOND,
            before
        )),
        [MIDNIGHT - 1, 0, 0, SECOND / 2, SECOND / 2]
    );
    // The caller's clock is a second behind, still in 2099; Redis's has
    // passed midnight: the request counts in 2100, a fresh period.
    let after = MIDNIGHT + SECOND / 4;
    assert_eq!(
        outcome(&one_unit(
            &mut connection,
            &rule,
            &key,
            MIDNIGHT - SECOND,
            after
        )),
        [MIDNIGHT + DAY - 1, 1, 0, 0, DAY - SECOND / 4]
    );
    // Clocks two days apart: the boundaries sent do not hold Redis's time,
    // and the call fails rather than guess.
    let reply = one_unit(
        &mut connection,
        &rule,
        &key,
        MIDNIGHT - 2 * DAY,
        after + DAY,
    );
    match &reply[..] {
        [Value::Int(2), Value::BulkString(message)] => {
            let message = String::from_utf8_lossy(message);
            assert!(message.contains("more than a period apart"), "{message}");
        }
        other => panic!("not failed: {other:?}"),
    }
    let _: () = redis::cmd("DEL").arg(&key).query(&mut connection).unwrap();
}
