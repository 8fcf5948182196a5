//! Redis's clock as this process sees it, for the deadline of every script
//! call that writes: the acquire script charges a request only if Redis runs
//! it by its deadline, which is its caller's deadline on Redis's clock. So a
//! call its caller gave up on (answered by the failure policy) that Redis
//! runs later, when it resumes from a stall, charges nothing.
//!
//! The deadline must be on Redis's own clock (`TIME`, read by the script),
//! never this host's: the two can differ by any amount. For each server (on
//! a cluster, the primary serving each slot: each may run on a host of its
//! own) this keeps a lower bound of the offset between its clock and this
//! process's monotonic clock, learnt from a `TIME` before the first call and
//! then from every reply (the script answers with the `TIME` it read). A
//! reply read `TIME` somewhere between the call's sending and its reply's
//! arrival, so `redis - arrival` is a lower bound of the offset: a deadline
//! computed with it is never later than the caller's (on Redis's clock),
//! only earlier by up to a round trip. The bound kept is the highest seen
//! since Redis's clock last moved back (a reply whose `redis - sending` is
//! below it: a clock set back, a failover to another host); then the new
//! reply's bound replaces it. A clock set forward raises the bound at the
//! next reply.
//!
//! A call's deadline is also a margin before its caller's, a tenth of the
//! timeout and at most 100 ms: the time for the reply of a call run just in
//! time to come back before the caller stops waiting.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};
use redis::{RedisResult, Value};
use tollgate_core::StoreError;

use crate::connection::{self, Connection};

/// The longest margin between a call's deadline and its caller's.
const MAX_MARGIN: Duration = Duration::from_millis(100);

/// The latest deadline sent (2^53 - 1 µs, about 285 years after 1970):
/// exact in Lua's doubles.
const LATEST: i64 = (1 << 53) - 1;

/// Whose clock: the one server, or the primary serving a cluster slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Node {
    /// The one Redis server (`redis://`).
    Server,
    /// The primary serving the slot of this route (`redis-cluster://`).
    Slot(Route),
}

impl Node {
    /// The node a call on `key` (the first key of the call) runs on.
    pub(crate) fn of(connection: &Connection, key: &str) -> Node {
        if connection.is_cluster() {
            Node::Slot(Route::with_key(key, SlotAddr::Master))
        } else {
            Node::Server
        }
    }
}

/// The offsets between Redis's clocks and this process's, per node.
#[derive(Debug)]
pub(crate) struct RedisClock {
    /// Local time 0 (this process's clock is microseconds since).
    anchor: Instant,
    /// How much earlier than its caller's a call's deadline is, in µs.
    margin: i64,
    /// Per node: a lower bound of Redis's clock minus this process's, in µs
    /// (at most one per cluster slot and the server).
    offsets: Mutex<HashMap<Node, i64>>,
}

impl RedisClock {
    /// A clock for calls whose callers wait `timeout`; no offset known yet.
    pub(crate) fn new(timeout: Duration) -> Self {
        let margin = (timeout / 10).min(MAX_MARGIN);
        RedisClock {
            anchor: Instant::now(),
            margin: i64::try_from(margin.as_micros()).unwrap_or(i64::MAX),
            offsets: Mutex::new(HashMap::new()),
        }
    }

    /// `at` in this process's microseconds (0 before the anchor).
    fn local(&self, at: Instant) -> i64 {
        let since = at.saturating_duration_since(self.anchor).as_micros();
        i64::try_from(since).unwrap_or(i64::MAX)
    }

    /// Learns from a call to `node` sent at `sent` and answered at
    /// `received` that Redis's clock read `redis` µs in between; the offset
    /// now kept.
    pub(crate) fn learn(&self, node: Node, sent: Instant, received: Instant, redis: u64) -> i64 {
        let redis = i64::try_from(redis).unwrap_or(i64::MAX);
        let low = redis.saturating_sub(self.local(received));
        let high = redis.saturating_sub(self.local(sent));
        let mut offsets = self.offsets.lock();
        let offset = offsets.entry(node).or_insert(low);
        // Tighter (or Redis's clock moved forward), or impossible (it moved
        // back): this reply's bound.
        if low > *offset || high < *offset {
            *offset = low;
        }
        *offset
    }

    /// The deadline, on the clock whose offset is `offset`, of a call whose
    /// caller waits until `by`: µs since the epoch on that clock, a margin
    /// earlier.
    pub(crate) fn deadline(&self, offset: i64, by: Instant) -> u64 {
        let local = self.local(by).saturating_sub(self.margin);
        let deadline = local.saturating_add(offset).clamp(0, LATEST);
        u64::try_from(deadline).unwrap_or(0)
    }

    /// The offset of `node`'s clock: the one kept, or learnt now from a
    /// `TIME` (before the first call to the node).
    ///
    /// # Errors
    ///
    /// [`StoreError::Unavailable`] when the `TIME` fails.
    pub(crate) async fn offset(
        &self,
        connection: &Connection,
        node: Node,
    ) -> Result<i64, StoreError> {
        if let Some(&offset) = self.offsets.lock().get(&node) {
            return Ok(offset);
        }
        self.sample(connection, node).await
    }

    /// Reads `node`'s `TIME` and learns from it; the offset now kept.
    ///
    /// # Errors
    ///
    /// [`StoreError::Unavailable`] when the `TIME` fails.
    pub(crate) async fn sample(
        &self,
        connection: &Connection,
        node: Node,
    ) -> Result<i64, StoreError> {
        let sent = Instant::now();
        let time = read_time(connection, node)
            .await
            .map_err(|error| connection::unavailable(&error, connection.is_cluster()))?;
        let received = Instant::now();
        let (seconds, micros) = time;
        let redis = seconds.saturating_mul(1_000_000).saturating_add(micros);
        Ok(self.learn(node, sent, received, redis))
    }
}

/// `node`'s `TIME`: seconds and microseconds.
async fn read_time(connection: &Connection, node: Node) -> RedisResult<(u64, u64)> {
    let time = redis::cmd("TIME");
    match node {
        Node::Slot(route) => {
            let Some(mut cluster) = connection.cluster().await? else {
                return time.query_async(&mut connection.clone()).await;
            };
            let routing = RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(route));
            let reply: Value = cluster.route_command(time, routing).await?;
            Ok(redis::from_redis_value(reply)?)
        }
        Node::Server => time.query_async(&mut connection.clone()).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1000;
    /// 2100-01-01T00:00:00Z in microseconds: a Redis clock far from this
    /// process's (which counts from its anchor).
    const REDIS: u64 = 4_102_444_800_000_000;

    fn at(clock: &RedisClock, micros: u64) -> Instant {
        clock.anchor + Duration::from_micros(micros)
    }

    /// A 50 ms timeout (a 5 ms margin); one call sent at local 10 ms,
    /// answered at 10.2 ms, Redis's `TIME` `redis` in between.
    fn learnt(redis: u64) -> RedisClock {
        let clock = RedisClock::new(Duration::from_millis(50));
        clock.learn(Node::Server, at(&clock, 10 * MS), at(&clock, 10_200), redis);
        clock
    }

    #[test]
    fn a_deadline_is_the_callers_on_redis_clock_a_margin_earlier() {
        // Redis read 2100-01-01 + 10.1 ms at local 10.1 ms.
        let clock = learnt(REDIS + 10_100);
        let offset = clock.offsets.lock()[&Node::Server];
        assert_eq!(offset, 4_102_444_799_999_900, "REDIS - 100 µs");
        // A caller waiting until local 60 ms: 55 ms on Redis's clock, less
        // the 100 µs the reply's bound leaves unknown.
        let deadline = clock.deadline(offset, at(&clock, 60 * MS));
        assert_eq!(deadline, REDIS + 54_900);
    }

    #[test]
    fn a_clock_set_back_or_forward_is_followed() {
        // Redis's clock an hour behind the last one (a failover to a host
        // whose clock is set otherwise): the old bound is impossible.
        let hour = 3_600_000_000;
        let clock = learnt(REDIS + 10_100);
        let back = clock.learn(
            Node::Server,
            at(&clock, 20 * MS),
            at(&clock, 20_300),
            REDIS - hour + 20_100,
        );
        assert_eq!(back, 4_102_441_199_999_800, "REDIS - 1 h - 200 µs");
        assert_eq!(
            clock.deadline(back, at(&clock, 70 * MS)),
            REDIS - hour + 64_800
        );
        // And an hour ahead again: the higher bound.
        let forward = clock.learn(
            Node::Server,
            at(&clock, 30 * MS),
            at(&clock, 30_100),
            REDIS + 30_050,
        );
        assert_eq!(forward, 4_102_444_799_999_950, "REDIS - 50 µs");
    }

    #[test]
    fn the_tightest_bound_is_kept() {
        let clock = learnt(REDIS + 10_100);
        // A slow reply (sent at 40 ms, answered at 45 ms, Redis's clock read
        // at 41 ms): its bound REDIS - 4 ms is lower; REDIS - 100 µs stays.
        let slow = clock.learn(
            Node::Server,
            at(&clock, 40 * MS),
            at(&clock, 45 * MS),
            REDIS + 41 * MS,
        );
        assert_eq!(slow, 4_102_444_799_999_900);
        // A quicker one narrows it: Redis read at 50.05 ms, answered at
        // 50.06 ms.
        let quick = clock.learn(
            Node::Server,
            at(&clock, 50 * MS),
            at(&clock, 50_060),
            REDIS + 50_050,
        );
        assert_eq!(quick, 4_102_444_799_999_990, "REDIS - 10 µs");
    }

    #[test]
    fn each_node_has_its_own_offset() {
        let clock = learnt(REDIS + 10_100);
        let slot = Node::Slot(Route::new(42, SlotAddr::Master));
        // That node's clock is a day behind: the server's offset stays.
        let day = 86_400_000_000;
        let other = clock.learn(slot, at(&clock, 0), at(&clock, 100), REDIS - day);
        assert_eq!(other, 4_102_358_399_999_900, "REDIS - 1 day - 100 µs");
        assert_eq!(clock.offsets.lock()[&Node::Server], 4_102_444_799_999_900);
    }

    #[test]
    fn deadlines_stay_in_the_scripts_exact_range() {
        // A timeout too long to count: a margin of 100 ms, a deadline
        // 2^53 - 1 at the latest, never below 0.
        let clock = RedisClock::new(Duration::MAX);
        assert_eq!(clock.margin, 100_000);
        let far = clock.anchor + Duration::from_secs(100 * 365 * 86_400);
        assert_eq!(clock.deadline(i64::MAX, far), 9_007_199_254_740_991);
        assert_eq!(clock.deadline(i64::MIN, far), 0);
        assert_eq!(clock.deadline(0, clock.anchor), 0);
    }
}
