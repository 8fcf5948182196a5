//! [`RedisStore`]: the [`Store`] whose limits live in Redis, and deciding a
//! request (`acquire`): its limits become [`ScriptLimit`]s, go to the acquire
//! script through the batcher, a call of their own or the steps of a split
//! request, and are sent again when a plan's tier changed. The admin
//! operations are in [`admin`], the policy-sync task in
//! [`policy_sync`](crate::policy_sync), the count of keys for `stats` in
//! [`count`](crate::count).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use arc_swap::ArcSwap;
use tollgate_core::{
    KeyReport, Limit, LimitDecision, LimitUnits, LimiterConfig, MaxWait, PlanPolicies, Policy,
    PolicyError, PreparedPolicy, Reach, Reservation, Resolution, Stats, Store, StoreError,
    StoreFuture,
};

use crate::admin;
use crate::batchers::{BatcherParts, Batchers, Renewals};
use crate::ca_file::read_ca_file;
use crate::call::{self, Outcome, Reply, Request, ScriptLimit};
use crate::config::{RedisConfig, TimeSource};
use crate::connection::{Connection, Target};
use crate::context::Context;
use crate::context::redis_clock::Node;
use crate::count::TrackedKeys;
use crate::plans::{Plans, check_exact};
use crate::policy_sync::sync_default_policy;
use crate::protocol::REDIS_TIME;
use crate::reserve::ScriptWait;
use crate::split;

/// Limits kept in Redis and shared by every gateway process pointed at it.
///
/// Each decision is one round trip: one `EVALSHA` of a script that performs the
/// engine's transition inside Redis, atomically, for every limit of the request
/// (core's rule of `Limiter::acquire_units`: limits counting refused units
/// charged whatever the others decide, the others all or nothing), reloaded
/// on `NOSCRIPT`. On one server, concurrent
/// requests share calls; on a Redis Cluster (`redis-cluster://` URLs) each
/// request is its own call, and a request whose limits sit in different slots
/// is decided in steps: every limit checked, then the all-or-nothing limits'
/// units taken from each in a fixed order, given back if one refuses, then
/// the counting limits charged (in two to four round trips; near a limit,
/// units briefly held this way can refuse another request). Calls are
/// pipelined on multiplexed connections that reconnect by themselves: on one
/// server, one per thread running a single-threaded event loop (each with
/// its own batcher, so a request never changes threads) and one shared by
/// the threads of a multi-threaded runtime; on a cluster, one shared. Each
/// decision gives up after the configured timeout with
/// [`StoreError::Unavailable`], and then uses no budget: every call that
/// writes carries its caller's deadline on Redis's own clock, and a call
/// Redis runs past it (resuming from a stall) charges nothing.
///
/// Tier assignments live in Redis beside each key's state; the default policy
/// lives in `PREFIX:config` and changes reach every process through a Redis
/// channel (and a refresh every few seconds). Tier definitions and exempt keys
/// come from each process's configuration. `stats` counts this process's
/// decisions; its `tracked_keys` scans Redis.
pub struct RedisStore {
    pub(crate) context: Context,
    pub(crate) minimum_ttl_us: u64,
    /// Share script calls between concurrent requests, one per event-loop
    /// thread; none on a cluster, where requests for different keys cannot
    /// share a call.
    batchers: Option<Batchers>,
    pub(crate) allowed: AtomicU64,
    pub(crate) rejected: AtomicU64,
    tracked: TrackedKeys,
    sync: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisStore")
            .field("prefix", &self.context.prefix)
            .field("timeout", &self.context.timeout)
            .finish_non_exhaustive()
    }
}

impl Drop for RedisStore {
    fn drop(&mut self) {
        self.sync.abort();
    }
}

/// Why the Redis store could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum RedisStoreError {
    /// The URL is not a Redis URL.
    #[error(
        "invalid Redis URL (expected redis://[user:password@]host:port[/db] or \
         redis-cluster://[user:password@]host:port[,host:port...], rediss:// or \
         rediss-cluster:// for TLS): {0}"
    )]
    Url(String),
    /// The CA file cannot be used: unreadable, or beside a URL without TLS.
    #[error("{0}")]
    CaFile(String),
    /// A policy cannot be computed exactly in Redis.
    #[error("{0}")]
    Policy(PolicyError),
    /// The key prefix holds `{` or `}`, which would move the keys' hash tag
    /// (Redis Cluster places a key by the text between its first braces).
    #[error("invalid Redis key prefix {0:?}: it may not contain '{{' or '}}'")]
    Prefix(String),
}

impl RedisStore {
    /// Connects to Redis (lazily: the store works as soon as Redis answers) and
    /// shares `limits`' default policy there unless one is set already. Must be
    /// called inside a Tokio runtime.
    ///
    /// # Errors
    ///
    /// [`RedisStoreError`] for a bad URL, a prefix with braces, or a policy
    /// the scripts cannot compute exactly.
    pub fn connect(config: RedisConfig, limits: &LimiterConfig) -> Result<Self, RedisStoreError> {
        if config.prefix.contains(['{', '}']) {
            return Err(RedisStoreError::Prefix(config.prefix));
        }
        let target = Target::parse(&config.url).map_err(RedisStoreError::Url)?;
        let root_certificates = match &config.ca_file {
            None => None,
            Some(path) if !target.is_tls() => {
                return Err(RedisStoreError::CaFile(format!(
                    "the CA file {} is for TLS: give the server as rediss:// (or \
                     rediss-cluster://)",
                    path.display()
                )));
            }
            Some(path) => Some(read_ca_file(path).map_err(RedisStoreError::CaFile)?),
        };
        let (connection, clients) =
            Connection::open_with(&target, config.timeout, root_certificates.as_deref())
                .map_err(|error| RedisStoreError::Url(error.to_string()))?;
        let plans =
            Plans::new(limits, &limits.default_plan(), 0).map_err(RedisStoreError::Policy)?;
        let plans = Arc::new(ArcSwap::from_pointee(plans));
        let renewals = Renewals::default();
        let sync = tokio::spawn(sync_default_policy(
            clients,
            renewals.clone(),
            connection.clone(),
            config.prefix.clone(),
            limits.default_plan(),
            Arc::clone(&plans),
            crate::policy_sync::Periods::of(&config),
        ));
        let minimum_ttl_us = u64::try_from(config.minimum_ttl.as_micros()).unwrap_or(u64::MAX);
        let now: Arc<dyn Fn() -> String + Send + Sync> = match &config.time {
            TimeSource::Redis => Arc::new(|| REDIS_TIME.to_owned()),
            TimeSource::Clock(clock) => {
                let clock = Arc::clone(clock);
                Arc::new(move || (clock.now_nanos() / 1000).to_string())
            }
        };
        let context = Context::new(
            connection,
            config.prefix,
            config.key_secret.map(|secret| Arc::from(secret.as_bytes())),
            config.timeout,
            now,
            plans,
        );
        let batchers = (!context.connection.is_cluster()).then(|| {
            // Redis's clock, learnt before the first decision needs it.
            let clock = Arc::clone(&context.clock);
            let connection = context.connection.clone();
            tokio::spawn(async move {
                let _ = clock.sample(&connection, Node::Server).await;
            });
            Batchers::new(BatcherParts {
                target,
                root_certificates,
                minimum_ttl_us,
                renewals,
            })
        });
        Ok(RedisStore {
            context,
            minimum_ttl_us,
            batchers,
            allowed: AtomicU64::new(0),
            rejected: AtomicU64::new(0),
            tracked: TrackedKeys::default(),
            sync,
        })
    }

    /// One request held to every limit, each charged its own units, at `now`
    /// microseconds (`None`: the store's time source): the decisions of
    /// [`Limiter::acquire_units`] on a microsecond gateway (limits whose
    /// policy counts refused units charged whatever the others decide, the
    /// others all or nothing among themselves, 0 units a look), in one round
    /// trip (a few, for limits in different slots of a cluster) whatever the
    /// units are. [`Store::acquire_units`] is this on the store's time,
    /// [`Store::acquire`] this with one unit per limit.
    ///
    /// [`Limiter::acquire_units`]: tollgate_core::Limiter::acquire_units
    ///
    /// # Errors
    ///
    /// [`StoreError::Unavailable`] when Redis does not answer in time, or a
    /// policy cannot be computed exactly in Redis.
    pub async fn acquire_units_at(
        &self,
        limits: &[LimitUnits<'_>],
        now: Option<u64>,
    ) -> Result<Vec<LimitDecision>, StoreError> {
        self.decide_units(limits, now, None)
            .await
            .map(|decided| decided.decisions)
    }

    /// Runs the acquire script, following tier changes made elsewhere, all
    /// within one timeout: the outcomes, and the wait (µs) of a request
    /// sent with a `max_wait` (0 otherwise). Limits in different slots of a
    /// cluster are decided in steps ([`split`]) and never wait: at once, as
    /// `acquire_units` decides.
    ///
    /// A plan found on another tier takes that tier's policies: its further
    /// limits (those of `owners` naming a further policy of the same limit)
    /// are replaced by the new tier's.
    pub(crate) async fn run(
        &self,
        limits: &mut Vec<ScriptLimit>,
        owners: &mut Vec<Owner>,
        plans: &Plans,
        now: Option<u64>,
        max_wait: Option<ScriptWait>,
    ) -> Result<(Vec<Outcome>, u64), StoreError> {
        let context = &self.context;
        let deadline = context.deadline();
        for _ in 0..3 {
            let request = Request {
                limits: limits.to_vec(),
                write: true,
                // Found again on each try: a tier changed changes its delay.
                max_wait: max_wait.map(|wait| wait.micros(limits, plans)),
            };
            let spread = limits
                .windows(2)
                .any(|pair| pair[0].names.hash_tag() != pair[1].names.hash_tag());
            // The call's time as the scripts take it, for calls made here.
            let now_text = || now.map_or_else(|| (context.now)(), |now| now.to_string());
            let reply = if context.connection.is_cluster() && spread {
                // Limits in different cluster slots: decided in steps.
                let scripts = split::Scripts {
                    acquire: Arc::clone(&context.acquire),
                    refund: Arc::clone(&context.refund),
                    clock: Arc::clone(&context.clock),
                    now: now_text(),
                    by: deadline,
                    minimum_ttl: self.minimum_ttl_us,
                };
                // A task of its own: units taken are given back even if this
                // caller stops waiting (every step after its deadline charges
                // nothing, and makes the steps give back what they took).
                let task = tokio::spawn(split::acquire(
                    context.connection.clone(),
                    scripts,
                    request.limits,
                ));
                let joined = async {
                    task.await
                        .map_err(|error| StoreError::Unavailable(error.to_string()))?
                };
                Some(context.before(deadline, joined).await?)
            } else if let (Some(batchers), None) = (&self.batchers, now) {
                let batcher = batchers.current(context);
                Some(
                    context
                        .before(deadline, batcher.submit(request, deadline))
                        .await?,
                )
            } else {
                // Replayed times go alone (a call has one `now`), and so does
                // every request in a cluster (a call reaches one slot).
                let now = now_text();
                let mut connection = context.connection.clone();
                let requests = [(&request, deadline)];
                let call = call::decide(
                    &mut connection,
                    &context.acquire,
                    &context.clock,
                    &now,
                    self.minimum_ttl_us,
                    &requests,
                );
                context.before(deadline, call).await?.pop()
            };
            match reply {
                Some(Reply::Decided(outcomes)) => return Ok((outcomes, 0)),
                Some(Reply::Reserved { wait, outcomes }) => return Ok((outcomes, wait)),
                Some(Reply::Failed(message)) => return Err(StoreError::Unavailable(message)),
                Some(Reply::Expired) => return Err(call::expired()),
                Some(Reply::Tier { index, tier }) if index < limits.len() => {
                    let tier: Arc<str> = Arc::from(tier.as_str());
                    context.remember_tier(&limits[index].names.tier, Arc::clone(&tier));
                    limits[index].move_to(tier, plans);
                    let owner = owners.get(index).map(|(owner, _)| *owner);
                    let mut kept = Vec::with_capacity(limits.len());
                    let mut kept_owners = Vec::with_capacity(owners.len());
                    for (position, (limit, whose)) in
                        limits.drain(..).zip(owners.drain(..)).enumerate()
                    {
                        if Some(whose.0) == owner && whose.1.is_some() {
                            continue;
                        }
                        let further = (position == index).then(|| limit.further(plans));
                        let index_of = whose.0;
                        kept.push(limit);
                        kept_owners.push(whose);
                        for (name, further) in further.into_iter().flatten() {
                            kept.push(further);
                            kept_owners.push((index_of, Some(name)));
                        }
                    }
                    *limits = kept;
                    *owners = kept_owners;
                }
                _ => return Err(call::unexpected()),
            }
        }
        Err(StoreError::Unavailable(
            "the tier of a key kept changing".into(),
        ))
    }
}

/// Whose a sent script limit is: the index of its limit in the call, and
/// the name of its plan's further policy (`None` for the limit's own).
pub(crate) type Owner = (usize, Option<Arc<str>>);

impl Store for RedisStore {
    fn prepare(&self, policy: Policy) -> Result<PreparedPolicy, PolicyError> {
        check_exact(&policy)?;
        PreparedPolicy::compile(policy, Resolution::Microseconds)
    }

    fn acquire<'a>(&'a self, limits: &'a [Limit<'a>]) -> StoreFuture<'a, Vec<LimitDecision>> {
        Box::pin(async move {
            let limits: Vec<LimitUnits<'_>> = limits
                .iter()
                .map(|limit| LimitUnits {
                    limit: *limit,
                    units: 1,
                })
                .collect();
            self.acquire_units_at(&limits, None).await
        })
    }

    fn acquire_units<'a>(
        &'a self,
        limits: &'a [LimitUnits<'a>],
    ) -> StoreFuture<'a, Vec<LimitDecision>> {
        Box::pin(self.acquire_units_at(limits, None))
    }

    /// Refunds through `lua/give_back.lua` (see `src/give_back.rs`): one
    /// call on a server, one per limit on a cluster (not atomic across keys).
    fn give_back_units<'a>(
        &'a self,
        limits: &'a [LimitUnits<'a>],
    ) -> StoreFuture<'a, Vec<LimitDecision>> {
        Box::pin(crate::give_back::give_back(
            &self.context,
            self.minimum_ttl_us,
            limits,
        ))
    }

    /// Charges past the limit through `lua/give_back.lua` with an
    /// overdraft (see `src/give_back.rs`).
    fn overdraw_units<'a>(
        &'a self,
        limits: &'a [LimitUnits<'a>],
        overdraft: u64,
    ) -> StoreFuture<'a, Vec<LimitDecision>> {
        Box::pin(crate::give_back::overdraw(
            &self.context,
            self.minimum_ttl_us,
            limits,
            overdraft,
        ))
    }

    fn reserve_units<'a>(
        &'a self,
        limits: &'a [LimitUnits<'a>],
        max_wait: MaxWait,
    ) -> StoreFuture<'a, Reservation> {
        Box::pin(self.reserve_units_at(limits, max_wait, None))
    }

    fn cancel_reservation<'a>(
        &'a self,
        limits: &'a [LimitUnits<'a>],
        counted_at: u64,
    ) -> StoreFuture<'a, Vec<u64>> {
        Box::pin(self.cancel_reservation_at(limits, counted_at, None))
    }

    fn is_exempt(&self, key: &str) -> bool {
        self.context.plans.load().exempt.contains(key)
    }

    fn default_policy(&self) -> StoreFuture<'_, Policy> {
        Box::pin(async move { Ok(self.context.plans.load().default.policy) })
    }

    fn configure(&self, policy: Policy) -> StoreFuture<'_, Policy> {
        Box::pin(admin::configure(&self.context, policy))
    }

    fn default_plan(&self) -> StoreFuture<'_, PlanPolicies> {
        Box::pin(async move { Ok(self.context.plans.load().default_plan()) })
    }

    fn configure_plan(&self, plan: PlanPolicies) -> StoreFuture<'_, PlanPolicies> {
        Box::pin(admin::configure_plan(&self.context, plan))
    }

    fn assign_tier<'a>(&'a self, key: &'a str, tier: &'a str) -> StoreFuture<'a, ()> {
        Box::pin(admin::assign_tier(&self.context, key, tier))
    }

    fn reset<'a>(&'a self, key: &'a str) -> StoreFuture<'a, bool> {
        Box::pin(admin::reset(&self.context, key))
    }

    fn inspect<'a>(&'a self, key: &'a str) -> StoreFuture<'a, KeyReport> {
        Box::pin(admin::inspect(&self.context, key))
    }

    fn stats(&self) -> StoreFuture<'_, Stats> {
        Box::pin(async move {
            let context = &self.context;
            Ok(Stats {
                tracked_keys: self
                    .tracked
                    .count(&context.connection, &context.prefix, context.timeout)
                    .await?,
                allowed: u128::from(self.allowed.load(Ordering::Relaxed)),
                rejected: u128::from(self.rejected.load(Ordering::Relaxed)),
            })
        })
    }

    fn check(&self) -> StoreFuture<'_, ()> {
        Box::pin(async move {
            let mut connection = self.context.connection.clone();
            let _: String = self
                .context
                .timed(redis::cmd("PING").query_async(&mut connection))
                .await?;
            Ok(())
        })
    }

    /// On one server, [`Store::check`]; on a Redis Cluster, the hash slots
    /// whose primary answers (see `reach.rs`).
    fn reach(&self) -> StoreFuture<'_, Reach> {
        Box::pin(async move {
            let cluster = self
                .context
                .within(async {
                    self.context
                        .connection
                        .cluster()
                        .await
                        .map_err(|error| crate::connection::unavailable(&error, true))
                })
                .await?;
            match cluster {
                None => {
                    self.check().await?;
                    Ok(Reach::WHOLE)
                }
                Some(cluster) => crate::reach::cluster_reach(&self.context, &cluster).await,
            }
        })
    }

    fn reconfigure(&self, config: &LimiterConfig) -> Result<(), tollgate_core::ConfigError> {
        config.validate()?;
        // The default policy the sync task or `configure` stores at the
        // same moment is kept.
        Plans::update(&self.context.plans, |current| {
            Plans::new(config, &current.default_plan(), current.generation)
        })
        .map_err(|reason| tollgate_core::ConfigError::Policy {
            name: "limits".into(),
            reason,
        })?;
        self.context.forget_tiers();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::{RedisConfig, RedisStore, RedisStoreError};
    use tollgate_core::LimiterConfig;

    #[tokio::test]
    async fn prefixes_with_braces_are_refused() {
        for prefix in ["a{b}", "{x}", "a}"] {
            let mut config = RedisConfig::new("redis://127.0.0.1:1");
            config.prefix = prefix.to_owned();
            let refused = RedisStore::connect(config, &LimiterConfig::default());
            assert!(
                matches!(&refused, Err(RedisStoreError::Prefix(text)) if text == prefix),
                "{prefix}"
            );
        }
        assert!(
            matches!(
                RedisStore::connect(
                    RedisConfig::new("redis-cluster://"),
                    &LimiterConfig::default()
                ),
                Err(RedisStoreError::Url(_))
            ),
            "a cluster URL without nodes"
        );
    }
}
