//! How much of a Redis Cluster can decide now: the hash slots whose primary
//! answers a `PING` within the store's timeout. `CLUSTER SLOTS`, asked of
//! every node and answered by the first, says which primary serves which slots; each
//! primary is then pinged at its own address, all at once. A node down or
//! stalled costs its slots only, so readiness can tell it from the whole
//! cluster down (a lone `PING` goes to one node at random, and says
//! nothing of the others).

use std::collections::BTreeMap;

use redis::Value;
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{
    MultipleNodeRoutingInfo, ResponsePolicy, Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr,
};
use tollgate_core::{Reach, StoreError};

use crate::context::Context;

/// A Redis Cluster's hash slots (the Redis Cluster specification).
pub(crate) const CLUSTER_SLOTS: u32 = 16_384;

/// The reach of the cluster `cluster` connects to.
///
/// # Errors
///
/// [`StoreError::Unavailable`] when no node gives the slot map, or no
/// primary answers.
pub(crate) async fn cluster_reach(
    context: &Context,
    cluster: &ClusterConnection,
) -> Result<Reach, StoreError> {
    let primaries = slot_map(context, cluster).await?;
    let asks = primaries.into_values().map(|served| {
        let mut connection = cluster.clone();
        async move {
            let routing = RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(Route::new(
                served.first_slot,
                SlotAddr::Master,
            )));
            let mut info = redis::cmd("CLUSTER");
            info.arg("INFO");
            let asked = context
                .timed(connection.route_command(info, routing))
                .await
                .and_then(|reply| cluster_is_up(&reply));
            (asked, served.slots)
        }
    });
    let mut answering: u32 = 0;
    let mut first_error = None;
    for (asked, slots) in futures_util::future::join_all(asks).await {
        match asked {
            Ok(()) => answering = answering.saturating_add(slots),
            Err(error) => {
                first_error.get_or_insert(error);
            }
        }
    }
    if answering == 0 {
        return Err(first_error.unwrap_or_else(|| {
            StoreError::Unavailable("the Redis Cluster serves no hash slot".to_owned())
        }));
    }
    Ok(Reach {
        answering: answering.min(CLUSTER_SLOTS),
        of: CLUSTER_SLOTS,
    })
}

/// Whether a `CLUSTER INFO` reply says the cluster is up.
fn cluster_is_up(reply: &Value) -> Result<(), StoreError> {
    let text = match reply {
        Value::BulkString(bytes) => String::from_utf8_lossy(bytes).into_owned(),
        Value::VerbatimString { text, .. } => text.clone(),
        Value::SimpleString(text) => text.clone(),
        _ => String::new(),
    };
    if text.lines().any(|line| line.trim() == "cluster_state:ok") {
        Ok(())
    } else {
        Err(StoreError::Unavailable(
            "the Redis Cluster is down (cluster_state is not ok)".to_owned(),
        ))
    }
}

/// What one primary serves: how many slots, and the first of them (by which
/// it is reached).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Served {
    slots: u32,
    first_slot: u16,
}

/// Each primary's address and how many slots it serves, from `CLUSTER
/// SLOTS` asked of every node at once, the first answer taken (a stalled
/// node does not hold it up).
async fn slot_map(
    context: &Context,
    cluster: &ClusterConnection,
) -> Result<BTreeMap<(String, u16), Served>, StoreError> {
    let mut connection = cluster.clone();
    let routing = RoutingInfo::MultiNode((
        MultipleNodeRoutingInfo::AllNodes,
        Some(ResponsePolicy::OneSucceeded),
    ));
    let mut slots = redis::cmd("CLUSTER");
    slots.arg("SLOTS");
    let reply = context
        .timed(connection.route_command(slots, routing))
        .await?;
    Ok(primaries(&reply))
}

/// The primaries of a `CLUSTER SLOTS` reply: each entry is the first and
/// last slot of a range, then its primary as `[host, port, id, ...]`, then
/// its replicas. Entries that do not read so, or name slots outside 0 to
/// 16,383, are passed over; a primary is told by its host and port as
/// announced (an empty or wildcard host is the same text for each node only
/// with its port, which tells them apart).
fn primaries(reply: &Value) -> BTreeMap<(String, u16), Served> {
    let mut primaries: BTreeMap<(String, u16), Served> = BTreeMap::new();
    let Value::Array(entries) = reply else {
        return primaries;
    };
    for entry in entries {
        let Value::Array(fields) = entry else {
            continue;
        };
        let (Some(Value::Int(first)), Some(Value::Int(last)), Some(Value::Array(primary))) =
            (fields.first(), fields.get(1), fields.get(2))
        else {
            continue;
        };
        let (Ok(first), Ok(last)) = (u16::try_from(*first), u16::try_from(*last)) else {
            continue;
        };
        if first > last || u32::from(last) >= CLUSTER_SLOTS {
            continue;
        }
        let host = match primary.first() {
            Some(Value::BulkString(bytes)) => String::from_utf8_lossy(bytes).into_owned(),
            Some(Value::SimpleString(text)) => text.clone(),
            _ => String::new(),
        };
        let Some(Value::Int(port)) = primary.get(1) else {
            continue;
        };
        let Ok(port) = u16::try_from(*port) else {
            continue;
        };
        let slots = u32::from(last - first) + 1;
        let served = primaries.entry((host, port)).or_insert(Served {
            slots: 0,
            first_slot: first,
        });
        served.slots = served.slots.saturating_add(slots);
        served.first_slot = served.first_slot.min(first);
    }
    primaries
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(first: i64, last: i64, host: &str, port: i64) -> Value {
        Value::Array(vec![
            Value::Int(first),
            Value::Int(last),
            Value::Array(vec![
                Value::BulkString(host.as_bytes().to_vec()),
                Value::Int(port),
                Value::BulkString(b"id".to_vec()),
            ]),
        ])
    }

    #[test]
    fn the_slot_map_counts_each_primarys_slots() {
        // redis-cli --cluster create's split of three primaries, one of them
        // serving two ranges.
        let reply = Value::Array(vec![
            range(0, 5460, "127.0.0.1", 7000),
            range(5461, 10922, "127.0.0.1", 7001),
            range(10923, 16000, "127.0.0.1", 7002),
            range(16001, 16383, "127.0.0.1", 7000),
            Value::Int(3),
        ]);
        let map = primaries(&reply);
        let served = |slots, first_slot| Served { slots, first_slot };
        assert_eq!(map.len(), 3);
        assert_eq!(map[&("127.0.0.1".to_owned(), 7000)], served(5461 + 383, 0));
        assert_eq!(map[&("127.0.0.1".to_owned(), 7001)], served(5462, 5461));
        assert_eq!(map[&("127.0.0.1".to_owned(), 7002)], served(5078, 10923));
    }

    #[test]
    fn slots_out_of_range_are_passed_over() {
        let reply = Value::Array(vec![
            range(0, 99, "127.0.0.1", 7000),
            range(100, 20_000, "127.0.0.1", 7001),
            range(-5, 3, "127.0.0.1", 7002),
            range(300, 200, "127.0.0.1", 7003),
        ]);
        let map = primaries(&reply);
        assert_eq!(map.len(), 1);
        assert_eq!(
            map[&("127.0.0.1".to_owned(), 7000)],
            Served {
                slots: 100,
                first_slot: 0
            }
        );
    }
}
