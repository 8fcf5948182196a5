//! The policy-sync task: keeps every gateway's default policy in step with
//! the one shared in Redis (`PREFIX:config`, written by `configure` through
//! `lua/configure.lua`). It subscribes to the channel `PREFIX:config`, reads
//! the policy before and after subscribing, on every message and after five
//! seconds without one, pings the node it is subscribed on, and moves to the
//! next node when one does not answer.

use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use futures_util::StreamExt;
use redis::AsyncCommands;
use tollgate_core::Policy;

use crate::connection::Connection;
use crate::keys::config_key;
use crate::plans::Plans;
use crate::protocol::{CONFIG_GENERATION, CONFIG_POLICY};

/// How long subscribing to the channel `PREFIX:config` (connecting included)
/// may take before the sync task gives up and tries again.
const SUBSCRIBE_TIMEOUT: Duration = Duration::from_secs(5);

/// How long the sync task waits for a message on the channel before it reads
/// the default policy anyway.
const REREAD_AFTER: Duration = Duration::from_secs(5);

/// How long the sync task waits after the channel failed or closed before it
/// reads the policy and subscribes again.
const RESUBSCRIBE_AFTER: Duration = Duration::from_millis(500);

/// Keeps the shared default policy in step. Sets the policy from the
/// configuration if Redis has none and reads it; subscribes to the channel
/// `PREFIX:config` through one of `clients` (at most [`SUBSCRIBE_TIMEOUT`];
/// the next client after a failure) and reads it again, then
/// re-reads it on every message and after every [`REREAD_AFTER`] without one
/// (for a `PUBLISH` that failed, a message the cluster bus lost), then pings
/// the node, and subscribes on the next one if it does not answer within
/// [`SUBSCRIBE_TIMEOUT`]. Without the channel it reads the policy about every
/// half second while subscribing is refused and every five and a half while
/// it hangs; it warns once per outage and logs when the channel is back.
pub(crate) async fn sync_default_policy(
    clients: Vec<redis::Client>,
    mut connection: Connection,
    prefix: String,
    configured: Policy,
    plans: Arc<ArcSwap<Plans>>,
) {
    let sync = PolicySync {
        key: config_key(&prefix),
        json: serde_json::to_string(&configured).unwrap_or_default(),
        plans,
    };
    // Whether this outage of the channel has been warned about.
    let mut warned = false;
    // The node the channel is subscribed on; the next one after a failure.
    let mut node = 0;
    loop {
        sync.refresh(&mut connection).await;
        let Some(client) = clients.get(node % clients.len().max(1)) else {
            // No node to subscribe on (a cluster URL always names one): read only.
            tokio::time::sleep(REREAD_AFTER).await;
            continue;
        };
        let subscribing = async {
            let mut pubsub = client.get_async_pubsub().await?;
            pubsub.subscribe(&sync.key).await?;
            Ok::<_, redis::RedisError>(pubsub)
        };
        let error = match tokio::time::timeout(SUBSCRIBE_TIMEOUT, subscribing).await {
            Ok(Ok(pubsub)) => {
                if warned {
                    tracing::info!("subscribed to the default policy's channel again");
                    warned = false;
                }
                // Read again once subscribed: a change published between the
                // read above and the subscription would otherwise wait for a
                // re-read.
                sync.refresh(&mut connection).await;
                if !follow_channel(pubsub, &mut connection, &sync).await {
                    tracing::warn!(
                        "the node of the default policy's channel did not answer a ping \
                         within {} ms; subscribing on the next",
                        SUBSCRIBE_TIMEOUT.as_millis()
                    );
                    // The info line says when the channel is back.
                    warned = true;
                    node = node.wrapping_add(1);
                } else {
                    tracing::debug!("the default policy's channel closed; subscribing again");
                }
                tokio::time::sleep(RESUBSCRIBE_AFTER).await;
                continue;
            }
            Ok(Err(error)) => error.to_string(),
            Err(_elapsed) => format!(
                "Redis did not answer within {} ms",
                SUBSCRIBE_TIMEOUT.as_millis()
            ),
        };
        node = node.wrapping_add(1);
        if warned {
            tracing::debug!(%error, "cannot subscribe to the default policy's channel");
        } else {
            tracing::warn!(
                %error,
                "cannot subscribe to the default policy's channel; \
                 reading the policy from Redis until it can"
            );
            warned = true;
        }
        tokio::time::sleep(RESUBSCRIBE_AFTER).await;
    }
}

/// What the sync task keeps in step: the key `PREFIX:config`, the
/// configuration's default policy as JSON (set there when Redis has none),
/// and the store's plans.
struct PolicySync {
    key: String,
    json: String,
    plans: Arc<ArcSwap<Plans>>,
}

impl PolicySync {
    /// Sets the configured default policy if Redis has none, reads the one in
    /// Redis and puts it in force when it or its generation changed.
    async fn refresh(&self, connection: &mut Connection) {
        let _: redis::RedisResult<bool> = connection
            .hset_nx(&self.key, CONFIG_POLICY, &self.json)
            .await;
        let read: redis::RedisResult<(Option<String>, Option<u64>)> = redis::cmd("HMGET")
            .arg(&self.key)
            .arg(CONFIG_POLICY)
            .arg(CONFIG_GENERATION)
            .query_async(connection)
            .await;
        if let Ok((Some(policy), generation)) = read
            && let Ok(value) = serde_json::from_str::<serde_json::Value>(&policy)
            && let Ok(policy) = Policy::from_json(&value)
        {
            let generation = generation.unwrap_or(0);
            let current = self.plans.load();
            if current.generation == generation && current.default.policy == policy {
                return;
            }
            drop(current);
            // Tiers a reload stores at the same moment are kept.
            if let Err(error) = Plans::update(&self.plans, |current| {
                current.with_default(policy, generation)
            }) {
                tracing::warn!(%error, "the shared default policy cannot be used");
            }
        }
    }
}

/// Follows the subscribed channel of `pubsub`: [`PolicySync::refresh`] on
/// every message and after every [`REREAD_AFTER`] without one, then a ping of the node. `true`
/// when the channel closed, `false` when the node did not answer the ping
/// within [`SUBSCRIBE_TIMEOUT`] (it stopped answering without closing).
async fn follow_channel(
    pubsub: redis::aio::PubSub,
    connection: &mut Connection,
    sync: &PolicySync,
) -> bool {
    let (mut sink, mut messages) = pubsub.split();
    loop {
        match tokio::time::timeout(REREAD_AFTER, messages.next()).await {
            Ok(Some(_)) => sync.refresh(connection).await,
            Ok(None) => return true,
            Err(_silence) => {
                sync.refresh(connection).await;
                let ping = sink.ping::<redis::Value>();
                if !matches!(
                    tokio::time::timeout(SUBSCRIBE_TIMEOUT, ping).await,
                    Ok(Ok(_))
                ) {
                    return false;
                }
            }
        }
    }
}
