//! The policy-sync task: keeps every gateway's default policy in step with
//! the one shared in Redis (`PREFIX:config`, written by `configure` through
//! `lua/configure.lua`). It subscribes to the channel `PREFIX:config`, reads
//! the policy before and after subscribing, on every message and after a
//! silence ([`Periods`], the store's settings), pings the node it is
//! subscribed on, and moves to the next node when one does not answer. It
//! notices a Redis that lost the policy (a restart without persistence, a
//! flush, an eviction): it warns, and puts the configuration's policy back
//! under a generation the others have not seen.

use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use futures_util::StreamExt;
use redis::AsyncCommands;
use tollgate_core::PlanPolicies;

use crate::batchers::Renewals;
use crate::config::RedisConfig;
use crate::connection::Connection;
use crate::keys::config_key;
use crate::plans::Plans;
use crate::protocol::{CONFIG_GENERATION, CONFIG_POLICY};

/// The sync task's periods, from [`RedisConfig`]'s `policy_*` settings.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Periods {
    /// How long subscribing to the channel (connecting included), or a ping
    /// of its node, may take before the task tries the next node.
    subscribe_timeout: Duration,
    /// How long the channel may be silent before the task reads the policy
    /// anyway and pings the node.
    reread_after: Duration,
    /// How long the task waits after the channel failed or closed before it
    /// reads the policy and subscribes again.
    resubscribe_after: Duration,
}

impl Periods {
    /// The periods `config` sets, each at least a millisecond (so that no
    /// setting makes the task read in a loop).
    pub(crate) fn of(config: &RedisConfig) -> Self {
        let at_least = |period: Duration| period.max(Duration::from_millis(1));
        Periods {
            subscribe_timeout: at_least(config.policy_subscribe_timeout),
            reread_after: at_least(config.policy_reread_after),
            resubscribe_after: at_least(config.policy_resubscribe_after),
        }
    }
}

/// Keeps the shared default policy in step. Sets the policy from the
/// configuration if Redis has none and reads it; subscribes to the channel
/// `PREFIX:config` through one of `clients` (within the subscribe timeout;
/// the next client after a failure) and reads it again, then re-reads it on
/// every message and after every silence of `reread_after` (for a `PUBLISH`
/// that failed, a message the cluster bus lost), then pings the node, and
/// subscribes on the next one if it does not answer within the subscribe
/// timeout. Without the channel it reads the policy every `resubscribe_after`
/// while subscribing is refused, and every subscribe timeout plus that while
/// it hangs; it warns once per outage and logs when the channel is back.
/// Each time the channel is lost, and when it is back after an outage, it
/// has the store's per-thread connections made anew (`renewals`).
pub(crate) async fn sync_default_policy(
    clients: Vec<redis::Client>,
    renewals: Renewals,
    mut connection: Connection,
    prefix: String,
    configured: PlanPolicies,
    plans: Arc<ArcSwap<Plans>>,
    periods: Periods,
) {
    let mut sync = PolicySync {
        key: config_key(&prefix),
        json: serde_json::to_string(&configured).unwrap_or_default(),
        configured,
        plans,
        last_read: None,
    };
    // Whether this outage of the channel has been warned about.
    let mut warned = false;
    // The node the channel is subscribed on; the next one after a failure.
    let mut node = 0;
    loop {
        sync.refresh(&mut connection).await;
        let Some(client) = clients.get(node % clients.len().max(1)) else {
            // No node to subscribe on (a cluster URL always names one): read only.
            tokio::time::sleep(periods.reread_after).await;
            continue;
        };
        let subscribing = async {
            let mut pubsub = client.get_async_pubsub().await?;
            pubsub.subscribe(&sync.key).await?;
            Ok::<_, redis::RedisError>(pubsub)
        };
        let error = match tokio::time::timeout(periods.subscribe_timeout, subscribing).await {
            Ok(Ok(pubsub)) => {
                if warned {
                    tracing::info!("subscribed to the default policy's channel again");
                    warned = false;
                    // Redis is back: connections made during the outage may
                    // have given up.
                    renewals.renew();
                }
                // Read again once subscribed: a change published between the
                // read above and the subscription would otherwise wait for a
                // re-read.
                sync.refresh(&mut connection).await;
                let answering = follow_channel(pubsub, &mut connection, &mut sync, periods).await;
                // The channel's connection closed or its node stopped
                // answering: so may the others' (a restart).
                renewals.renew();
                if !answering {
                    tracing::warn!(
                        "the node of the default policy's channel did not answer a ping \
                         within {} ms; subscribing on the next",
                        periods.subscribe_timeout.as_millis()
                    );
                    // The info line says when the channel is back.
                    warned = true;
                    node = node.wrapping_add(1);
                } else {
                    tracing::debug!("the default policy's channel closed; subscribing again");
                }
                tokio::time::sleep(periods.resubscribe_after).await;
                continue;
            }
            Ok(Err(error)) => error.to_string(),
            Err(_elapsed) => format!(
                "Redis did not answer within {} ms",
                periods.subscribe_timeout.as_millis()
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
        tokio::time::sleep(periods.resubscribe_after).await;
    }
}

/// What the sync task keeps in step: the key `PREFIX:config`, the
/// configuration's default policy as JSON (set there when Redis has none),
/// the store's plans, and the generation it last read from Redis.
struct PolicySync {
    key: String,
    json: String,
    /// The configuration's default policy, to say so when Redis's differs.
    configured: PlanPolicies,
    plans: Arc<ArcSwap<Plans>>,
    /// The generation of the last policy read from Redis; `None` before the
    /// first read.
    last_read: Option<u64>,
}

impl PolicySync {
    /// Sets the configured default policy if Redis has none, reads the one in
    /// Redis and puts it in force when it or its generation changed. A policy
    /// missing after one was read means Redis lost it: the configured one is
    /// set with the next generation, announced on the channel, and a warning
    /// logged; a generation lower than one seen before is warned about too.
    async fn refresh(&mut self, connection: &mut Connection) {
        self.restore(connection).await;
        // A read older than the generation in force was most likely
        // overtaken by a `configure` made here meanwhile: read once more.
        for read_again in [true, false] {
            let read: redis::RedisResult<(Option<String>, Option<u64>)> = redis::cmd("HMGET")
                .arg(&self.key)
                .arg(CONFIG_POLICY)
                .arg(CONFIG_GENERATION)
                .query_async(connection)
                .await;
            let Ok((Some(policy), generation)) = read else {
                return;
            };
            // One policy object, or a list of named policies.
            let Ok(policy) =
                PlanPolicies::from_deserializer(&mut serde_json::Deserializer::from_str(&policy))
            else {
                return;
            };
            let generation = generation.unwrap_or(0);
            let current = self.plans.load();
            if read_again && generation < current.generation {
                continue;
            }
            let seen = self.last_read.unwrap_or(0).max(current.generation);
            if generation < seen {
                tracing::warn!(
                    key = %self.key,
                    from = seen,
                    to = generation,
                    "the shared default policy's generation went back: Redis lost it \
                     (a restart without persistence, a flush or an eviction) and it was set \
                     again; the tier assignments and limit state kept in Redis are likely \
                     lost too: keys start afresh, on the default policy until their tiers \
                     are assigned again"
                );
            }
            // The first read: Redis's shared policy wins over the file's,
            // which is said once it is in force.
            let overridden = self.last_read.is_none() && policy != self.configured;
            self.last_read = Some(generation);
            if current.generation != generation || current.default_plan() != policy {
                drop(current);
                // Tiers a reload stores at the same moment are kept.
                if let Err(error) = Plans::update(&self.plans, |current| {
                    current.with_default(&policy, generation)
                }) {
                    tracing::warn!(%error, "the shared default policy cannot be used");
                    return;
                }
            }
            if overridden {
                tracing::warn!(
                    key = %self.key,
                    in_force = %serde_json::to_string(&policy).unwrap_or_default(),
                    configured = %self.json,
                    "the default policy in force is the one shared in Redis (set by a gateway's \
                     first start or PUT /admin/policy), not this configuration's, which is not \
                     applied: PUT /admin/policy puts a policy in force on every gateway on this \
                     Redis"
                );
            }
            return;
        }
    }

    /// Sets the configured policy in Redis if Redis has none, atomically with
    /// its generation: 0 on this gateway's first read; after a loss (a policy
    /// was read before), Redis's clock in microseconds, or one past every
    /// generation this gateway has seen if that is larger, so that no
    /// generation used before comes back into force and no state written
    /// under it counts again (`configure` counts on from such a start too);
    /// then warns and announces it on the channel. A gateway that starts
    /// while the policy is lost, before any that saw it, sets generation 0.
    async fn restore(&self, connection: &mut Connection) {
        let exists: redis::RedisResult<bool> = connection.hexists(&self.key, CONFIG_POLICY).await;
        if !matches!(exists, Ok(false)) {
            return;
        }
        let generation = match self.last_read {
            // The first set of all (or a loss this gateway cannot tell from
            // one): generation 0, the one every store starts with, so that
            // what it decided before its first read stays in force.
            None => 0,
            Some(last) => {
                let seen = last.max(self.plans.load().generation).saturating_add(1);
                let time: redis::RedisResult<(u64, u64)> =
                    redis::cmd("TIME").query_async(connection).await;
                let Ok((seconds, micros)) = time else {
                    return;
                };
                seconds
                    .saturating_mul(1_000_000)
                    .saturating_add(micros)
                    .max(seen)
            }
        };
        let set: redis::RedisResult<(bool, bool)> = redis::pipe()
            .atomic()
            .hset_nx(&self.key, CONFIG_POLICY, &self.json)
            .hset_nx(&self.key, CONFIG_GENERATION, generation)
            .query_async(connection)
            .await;
        if !matches!(set, Ok((true, _))) || self.last_read.is_none() {
            return;
        }
        tracing::warn!(
            key = %self.key,
            generation,
            "the shared default policy was gone from Redis (a restart without persistence, \
             a flush or an eviction): set it again from the configuration; the tier \
             assignments and limit state kept in Redis are likely lost too: keys start \
             afresh, on the default policy until their tiers are assigned again"
        );
        let _: redis::RedisResult<i64> = connection.publish(&self.key, generation).await;
    }
}

/// Follows the subscribed channel of `pubsub`: [`PolicySync::refresh`] on
/// every message and after every silence of the re-read period, then a ping
/// of the node. `true` when the channel closed, `false` when the node did not
/// answer the ping within the subscribe timeout (it stopped answering
/// without closing).
async fn follow_channel(
    pubsub: redis::aio::PubSub,
    connection: &mut Connection,
    sync: &mut PolicySync,
    periods: Periods,
) -> bool {
    let (mut sink, mut messages) = pubsub.split();
    loop {
        match tokio::time::timeout(periods.reread_after, messages.next()).await {
            Ok(Some(_)) => sync.refresh(connection).await,
            Ok(None) => return true,
            Err(_silence) => {
                sync.refresh(connection).await;
                let ping = sink.ping::<redis::Value>();
                if !matches!(
                    tokio::time::timeout(periods.subscribe_timeout, ping).await,
                    Ok(Ok(_))
                ) {
                    return false;
                }
            }
        }
    }
}

/// The default policy shared in Redis under `prefix` (`PREFIX:config`), if
/// one is: the one every gateway on that Redis puts in force, whatever its
/// file says. For `tollgate check-config --store`; `ca_file` as
/// [`RedisConfig::ca_file`](crate::RedisConfig).
///
/// # Errors
///
/// The Redis client's error when `url` cannot be used or Redis does not
/// answer within `timeout` (its text may hold part of the URL: show it
/// nowhere), or a stored policy that is not one.
pub async fn shared_default_policy(
    url: &str,
    prefix: &str,
    timeout: Duration,
    ca_file: Option<&std::path::Path>,
) -> Result<Option<PlanPolicies>, String> {
    let target = crate::connection::Target::parse(url)?;
    let roots = ca_file.map(crate::ca_file::read_ca_file).transpose()?;
    let (mut connection, _) = Connection::open_with(&target, timeout, roots.as_deref())
        .map_err(|error| error.to_string())?;
    let mut command = redis::cmd("HGET");
    command.arg(config_key(prefix)).arg(CONFIG_POLICY);
    let read = command.query_async::<Option<String>>(&mut connection);
    let stored = tokio::time::timeout(timeout, read)
        .await
        .map_err(|_| format!("no answer within {} ms", timeout.as_millis()))?
        .map_err(|error| error.to_string())?;
    stored
        .map(|text| {
            PlanPolicies::from_deserializer(&mut serde_json::Deserializer::from_str(&text))
                .map_err(|error| format!("the shared policy is not one: {error}"))
        })
        .transpose()
}
