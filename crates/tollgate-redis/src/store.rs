//! [`RedisStore`]: the [`Store`] whose limits live in Redis.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use futures_util::StreamExt;
use parking_lot::Mutex;
use redis::{AsyncCommands, Script};
use tollgate_core::{
    DEFAULT_TIER, Decision, KeyReport, Limit, LimitDecision, LimiterConfig, Policy, PolicyError,
    PreparedPolicy, Resolution, Stats, Store, StoreError, StoreFuture, UnknownTier,
};

use crate::batch::{self, Batcher};
use crate::config::{RedisConfig, TimeSource};
use crate::connection::{self, Connection, Target as RedisTarget};
use crate::count;
use crate::keys::{KeyNames, Space, config_key};
use crate::plans::{Plans, ScriptRule, check_exact};
use crate::script::{self, Reply};
use crate::split;

/// The most units one script call takes (the scripts' exact range); larger
/// batches are sent as this many: no limit is larger, so nothing changes.
const MAX_SCRIPT_UNITS: u64 = 1 << 52;

/// Tier assignments remembered per process before the cache starts afresh.
const TIER_CACHE: usize = 100_000;

/// Limits kept in Redis and shared by every gateway process pointed at it.
///
/// Each decision is one round trip: one `EVALSHA` of a script that performs the
/// engine's transition inside Redis, atomically, for every limit of the request
/// (all or nothing), reloaded on `NOSCRIPT`. On one server, concurrent
/// requests share calls; on a Redis Cluster (`redis-cluster://` URLs) each
/// request is its own call, and a request whose limits sit in different slots
/// is decided in steps: every limit checked, then one unit taken from each in
/// a fixed order, given back if one refuses (all or nothing, in two or three
/// round trips; near a limit, a unit briefly held this way can refuse another
/// request). Calls are pipelined on one multiplexed connection that
/// reconnects by itself; each decision gives up after the configured timeout
/// with [`StoreError::Unavailable`].
///
/// Tier assignments live in Redis beside each key's state; the default policy
/// lives in `PREFIX:config` and changes reach every process through a Redis
/// channel (and a refresh every few seconds). Tier definitions and exempt keys
/// come from each process's configuration. `stats` counts this process's
/// decisions; its `tracked_keys` scans Redis.
pub struct RedisStore {
    connection: Connection,
    acquire: Arc<Script>,
    refund: Arc<Script>,
    admin: Script,
    configure: Script,
    prefix: String,
    timeout: Duration,
    minimum_ttl_us: u64,
    /// Shares script calls between concurrent requests; none on a cluster,
    /// where requests for different keys cannot share a call.
    batcher: Option<Batcher>,
    /// Microseconds as text for a script call; empty for Redis's `TIME`.
    now: Arc<dyn Fn() -> String + Send + Sync>,
    plans: Arc<ArcSwap<Plans>>,
    tiers: Mutex<HashMap<String, Arc<str>>>,
    allowed: AtomicU64,
    rejected: AtomicU64,
    /// The last count of state keys, and when it was made.
    counted: Mutex<Option<(Instant, u64)>>,
    sync: tokio::task::JoinHandle<()>,
}

/// How long a count of the state keys in Redis is reused.
const COUNT_EVERY: Duration = Duration::from_secs(10);

/// `text` with the glob characters of Redis's `SCAN MATCH` escaped.
fn glob_escaped(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for character in text.chars() {
        if matches!(character, '*' | '?' | '[' | ']' | '\\') {
            escaped.push('\\');
        }
        escaped.push(character);
    }
    escaped
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisStore")
            .field("prefix", &self.prefix)
            .field("timeout", &self.timeout)
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
         redis-cluster://[user:password@]host:port[,host:port...]): {0}"
    )]
    Url(String),
    /// A policy cannot be computed exactly in Redis.
    #[error("{0}")]
    Policy(PolicyError),
    /// The key prefix holds `{` or `}`, which would move the keys' hash tag
    /// (Redis Cluster places a key by the text between its first braces).
    #[error("invalid Redis key prefix {0:?}: it may not contain '{{' or '}}'")]
    Prefix(String),
}

/// One limit of a call, as sent.
struct Target {
    names: Arc<KeyNames>,
    /// The tier the plan is expected on; `None` for a policy limit.
    tier: Option<Arc<str>>,
    rule: Arc<ScriptRule>,
}

impl Target {
    fn call(&self) -> batch::LimitCall {
        batch::LimitCall {
            names: Arc::clone(&self.names),
            tier: self.tier.clone(),
            rule: Arc::clone(&self.rule),
        }
    }
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
        let target = RedisTarget::parse(&config.url).map_err(RedisStoreError::Url)?;
        let (connection, clients) = Connection::open(&target, config.timeout)
            .map_err(|error| RedisStoreError::Url(error.to_string()))?;
        let plans =
            Plans::new(limits, limits.default_policy, 0).map_err(RedisStoreError::Policy)?;
        let plans = Arc::new(ArcSwap::from_pointee(plans));
        let sync = tokio::spawn(sync_default_policy(
            clients,
            connection.clone(),
            config.prefix.clone(),
            limits.default_policy,
            Arc::clone(&plans),
        ));
        let minimum_ttl_us = u64::try_from(config.minimum_ttl.as_micros()).unwrap_or(u64::MAX);
        let now: Arc<dyn Fn() -> String + Send + Sync> = match &config.time {
            TimeSource::Redis => Arc::new(String::new),
            TimeSource::Clock(clock) => {
                let clock = Arc::clone(clock);
                Arc::new(move || (clock.now_nanos() / 1000).to_string())
            }
        };
        let acquire = Arc::new(script::acquire());
        let batcher = (!connection.is_cluster()).then(|| {
            Batcher::start(
                connection.clone(),
                Arc::clone(&acquire),
                Arc::clone(&now),
                minimum_ttl_us,
            )
        });
        Ok(RedisStore {
            connection,
            acquire,
            refund: Arc::new(script::refund()),
            admin: script::admin(),
            configure: script::configure(),
            prefix: config.prefix,
            timeout: config.timeout,
            minimum_ttl_us,
            batcher,
            now,
            plans,
            tiers: Mutex::new(HashMap::new()),
            allowed: AtomicU64::new(0),
            rejected: AtomicU64::new(0),
            counted: Mutex::new(None),
            sync,
        })
    }

    /// `units` requests held to every limit, all or nothing (for several
    /// limits `units` must be 1), at `now` microseconds (`None`: the store's
    /// time source). The same decisions as [`Limiter::acquire`] and
    /// [`Limiter::request_batch`] on a microsecond gateway, in one round trip
    /// (a few, for limits in different slots of a cluster)
    /// whatever `units` is.
    ///
    /// [`Limiter::acquire`]: tollgate_core::Limiter::acquire
    /// [`Limiter::request_batch`]: tollgate_core::Limiter::request_batch
    ///
    /// # Errors
    ///
    /// [`StoreError::Unavailable`] when Redis does not answer in time, or a
    /// policy cannot be computed exactly in Redis.
    pub async fn acquire_units(
        &self,
        limits: &[Limit<'_>],
        units: u64,
        now: Option<u64>,
    ) -> Result<Vec<LimitDecision>, StoreError> {
        let plans = self.plans.load_full();
        // Exempt plans are decided here; the rest go to Redis.
        let mut decisions: Vec<Option<LimitDecision>> = limits
            .iter()
            .map(|limit| match limit {
                Limit::Plan(key) if plans.exempt.contains(*key) => Some(LimitDecision {
                    decision: Decision::exempt(units),
                    policy: None,
                    tier: None,
                }),
                _ => None,
            })
            .collect();
        let mut targets = Vec::with_capacity(limits.len());
        for (limit, decided) in limits.iter().zip(&decisions) {
            if decided.is_some() {
                continue;
            }
            targets.push(match limit {
                Limit::Plan(key) => {
                    let names = Arc::new(KeyNames::new(&self.prefix, Space::Plan, key));
                    let tier = self.tiers.lock().get(&names.tier).cloned();
                    let tier = tier.unwrap_or_else(|| Arc::from(DEFAULT_TIER));
                    let rule = plans.rule_for(&tier).clone();
                    Target {
                        names,
                        tier: Some(tier),
                        rule,
                    }
                }
                Limit::Policy { key, policy } => Target {
                    names: Arc::new(KeyNames::new(&self.prefix, Space::Policy, key)),
                    tier: None,
                    rule: Arc::new(ScriptRule::for_prepared(policy)?),
                },
            });
        }
        if !targets.is_empty() {
            let outcomes = self.run(&mut targets, &plans, units, now).await?;
            let mut outcomes = targets.iter().zip(outcomes);
            for slot in decisions.iter_mut().filter(|slot| slot.is_none()) {
                let Some((target, outcome)) = outcomes.next() else {
                    break;
                };
                *slot = Some(LimitDecision {
                    decision: Decision {
                        allowed: outcome.allowed,
                        rejected: units.saturating_sub(outcome.allowed),
                        remaining: Some(outcome.remaining),
                        retry_after: Duration::from_micros(outcome.retry_after),
                        reset_after: Duration::from_micros(outcome.reset_after),
                    },
                    policy: Some(target.rule.policy),
                    tier: target.tier.clone().filter(|tier| &**tier != DEFAULT_TIER),
                });
            }
        }
        let decisions: Vec<LimitDecision> = decisions.into_iter().flatten().collect();
        for decision in &decisions {
            self.allowed
                .fetch_add(decision.decision.allowed, Ordering::Relaxed);
            self.rejected
                .fetch_add(decision.decision.rejected, Ordering::Relaxed);
        }
        Ok(decisions)
    }

    /// Runs the acquire script, following tier changes made elsewhere, all
    /// within one timeout.
    async fn run(
        &self,
        targets: &mut [Target],
        plans: &Plans,
        units: u64,
        now: Option<u64>,
    ) -> Result<Vec<script::Outcome>, StoreError> {
        let deadline = self.deadline();
        for _ in 0..3 {
            let request = batch::Request {
                limits: targets.iter().map(Target::call).collect(),
                units: units.min(MAX_SCRIPT_UNITS),
                write: true,
            };
            let spread = targets
                .windows(2)
                .any(|pair| pair[0].names.hash_tag() != pair[1].names.hash_tag());
            // The call's time as the scripts take it, for calls made here.
            let now_text = || now.map_or_else(|| (self.now)(), |now| now.to_string());
            let reply = if self.connection.is_cluster() && spread {
                // Limits in different cluster slots: decided in steps.
                let scripts = split::Scripts {
                    acquire: Arc::clone(&self.acquire),
                    refund: Arc::clone(&self.refund),
                    now: now_text(),
                    minimum_ttl: self.minimum_ttl_us,
                };
                // A task of its own: units taken are given back even if this
                // caller stops waiting.
                let task = tokio::spawn(split::acquire(
                    self.connection.clone(),
                    scripts,
                    request.limits,
                ));
                let joined = async {
                    task.await
                        .map_err(|error| StoreError::Unavailable(error.to_string()))?
                };
                Some(self.before(deadline, joined).await?)
            } else if let (Some(batcher), None) = (&self.batcher, now) {
                Some(
                    self.before(deadline, batcher.submit(request, deadline))
                        .await?,
                )
            } else {
                // Replayed times go alone (a call has one `now`), and so does
                // every request in a cluster (a call reaches one slot).
                let now = now_text();
                let mut connection = self.connection.clone();
                let requests = [&request];
                let call = batch::call(
                    &mut connection,
                    &self.acquire,
                    &now,
                    self.minimum_ttl_us,
                    &requests,
                );
                self.before(deadline, call).await?.pop()
            };
            match reply {
                Some(Reply::Decided(outcomes)) => return Ok(outcomes),
                Some(Reply::Failed(message)) => return Err(StoreError::Unavailable(message)),
                Some(Reply::Tier { index, tier }) if index < targets.len() => {
                    let tier: Arc<str> = Arc::from(tier.as_str());
                    self.remember_tier(&targets[index].names.tier, Arc::clone(&tier));
                    targets[index].rule = plans.rule_for(&tier).clone();
                    targets[index].tier = Some(tier);
                }
                _ => {
                    return Err(StoreError::Unavailable(
                        "unexpected reply from the script".into(),
                    ));
                }
            }
        }
        Err(StoreError::Unavailable(
            "the tier of a key kept changing".into(),
        ))
    }

    /// `call`, or [`StoreError::Unavailable`] at `deadline`.
    async fn before<T>(
        &self,
        deadline: Instant,
        call: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        tokio::time::timeout_at(deadline.into(), call)
            .await
            .unwrap_or_else(|_| {
                Err(StoreError::Unavailable(format!(
                    "Redis did not answer within {} ms",
                    self.timeout.as_millis()
                )))
            })
    }

    /// When a call starting now must have ended: after the timeout, or (for a
    /// timeout too long to count from now) in a hundred years.
    fn deadline(&self) -> Instant {
        let now = Instant::now();
        now.checked_add(self.timeout)
            .or_else(|| now.checked_add(Duration::from_secs(100 * 365 * 86_400)))
            .unwrap_or(now)
    }

    /// `call`, or [`StoreError::Unavailable`] after the timeout.
    async fn within<T>(
        &self,
        call: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        self.before(self.deadline(), call).await
    }

    fn remember_tier(&self, key: &str, tier: Arc<str>) {
        let mut tiers = self.tiers.lock();
        if tiers.len() >= TIER_CACHE {
            tiers.clear();
        }
        tiers.insert(key.to_owned(), tier);
    }

    async fn timed<T>(
        &self,
        call: impl Future<Output = redis::RedisResult<T>>,
    ) -> Result<T, StoreError> {
        self.within(async { call.await.map_err(|error| connection::unavailable(&error)) })
            .await
    }

    async fn admin_call(&self, key: &str, command: &[&str]) -> Result<bool, StoreError> {
        let names = KeyNames::new(&self.prefix, Space::Plan, key);
        let mut invocation = self.admin.prepare_invoke();
        invocation
            .key(&names.state)
            .key(&names.log)
            .key(&names.tier);
        for argument in command {
            invocation.arg(*argument);
        }
        let mut connection = self.connection.clone();
        let done: i64 = self.timed(invocation.invoke_async(&mut connection)).await?;
        if command.first() == Some(&"tier") {
            let tier = command.get(1).copied().unwrap_or(DEFAULT_TIER);
            self.remember_tier(&names.tier, Arc::from(tier));
        }
        Ok(done == 1)
    }

    async fn inspect_key(&self, key: &str) -> Result<KeyReport, StoreError> {
        let plans = self.plans.load_full();
        if plans.exempt.contains(key) {
            return Ok(KeyReport {
                tier: self.tier_of(key).await?,
                policy: None,
                state: Some(Decision::exempt(0)),
            });
        }
        let names = KeyNames::new(&self.prefix, Space::Plan, key);
        let mut connection = self.connection.clone();
        let (tier, exists): (Option<String>, bool) = self
            .timed(
                redis::pipe()
                    .get(&names.tier)
                    .exists(&names.state)
                    .query_async(&mut connection),
            )
            .await?;
        let tier = tier
            .filter(|tier| !tier.is_empty())
            .unwrap_or_else(|| DEFAULT_TIER.to_owned());
        let rule = plans.rule_for(&tier).clone();
        let state = if exists {
            let target = Target {
                names: Arc::new(names),
                tier: Some(Arc::from(tier.as_str())),
                rule: Arc::clone(&rule),
            };
            let request = batch::Request {
                limits: vec![target.call()],
                units: 0,
                write: false,
            };
            let requests = [&request];
            // The store's time, as every decision's: Redis's `TIME` by
            // default, or the caller's clock.
            let now = (self.now)();
            let call = batch::call(&mut connection, &self.acquire, &now, 0, &requests);
            match self.within(call).await?.pop() {
                Some(Reply::Decided(outcomes)) => outcomes.first().map(|outcome| Decision {
                    allowed: 0,
                    rejected: 0,
                    remaining: Some(outcome.remaining),
                    retry_after: Duration::ZERO,
                    reset_after: Duration::from_micros(outcome.reset_after),
                }),
                _ => None,
            }
        } else {
            None
        };
        Ok(KeyReport {
            tier,
            policy: Some(rule.policy),
            state,
        })
    }

    async fn tier_of(&self, key: &str) -> Result<String, StoreError> {
        let names = KeyNames::new(&self.prefix, Space::Plan, key);
        let mut connection = self.connection.clone();
        let tier: Option<String> = self.timed(connection.get(&names.tier)).await?;
        Ok(tier
            .filter(|tier| !tier.is_empty())
            .unwrap_or_else(|| DEFAULT_TIER.to_owned()))
    }

    /// The state keys in Redis under the prefix, counted by a scan at most
    /// every [`COUNT_EVERY`] (a scan visits every key in Redis).
    async fn tracked_keys(&self) -> Result<u64, StoreError> {
        if let Some((counted_at, count)) = *self.counted.lock()
            && counted_at.elapsed() < COUNT_EVERY
        {
            return Ok(count);
        }
        let pattern = format!("{}:{{*}}:s", glob_escaped(&self.prefix));
        let scan = count::count_keys(&self.connection, &pattern);
        // A scan visits every key: allow it more time than one decision.
        match tokio::time::timeout(self.timeout.saturating_mul(100), scan).await {
            Ok(Ok(count)) => {
                *self.counted.lock() = Some((Instant::now(), count));
                Ok(count)
            }
            Ok(Err(error)) => Err(connection::unavailable(&error)),
            Err(_) => Err(StoreError::Unavailable(
                "counting keys took too long".into(),
            )),
        }
    }
}

impl Store for RedisStore {
    fn prepare(&self, policy: Policy) -> Result<PreparedPolicy, PolicyError> {
        check_exact(&policy)?;
        PreparedPolicy::compile(policy, Resolution::Microseconds)
    }

    fn acquire<'a>(&'a self, limits: &'a [Limit<'a>]) -> StoreFuture<'a, Vec<LimitDecision>> {
        Box::pin(self.acquire_units(limits, 1, None))
    }

    fn is_exempt(&self, key: &str) -> bool {
        self.plans.load().exempt.contains(key)
    }

    fn default_policy(&self) -> StoreFuture<'_, Policy> {
        Box::pin(async move { Ok(self.plans.load().default.policy) })
    }

    fn configure(&self, policy: Policy) -> StoreFuture<'_, Policy> {
        Box::pin(async move {
            check_exact(&policy)?;
            let json = serde_json::to_string(&policy)
                .map_err(|error| StoreError::Unavailable(error.to_string()))?;
            let key = config_key(&self.prefix);
            let mut connection = self.connection.clone();
            let generation: u64 = self
                .timed(
                    self.configure
                        .key(&key)
                        .arg(&json)
                        .invoke_async(&mut connection),
                )
                .await?;
            // Tiers a reload stores at the same moment are kept. (A read of
            // the older policy the sync task stores just after is put right
            // by the message published below.)
            Plans::update(&self.plans, |current| {
                current.with_default(policy, generation)
            })?;
            let _: Result<i64, _> = self.timed(connection.publish(&key, generation)).await;
            Ok(policy)
        })
    }

    fn assign_tier<'a>(&'a self, key: &'a str, tier: &'a str) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            if tier != DEFAULT_TIER && !self.plans.load().tiers.contains_key(tier) {
                return Err(StoreError::UnknownTier(UnknownTier(tier.to_owned())));
            }
            self.admin_call(key, &["tier", tier]).await.map(|_| ())
        })
    }

    fn reset<'a>(&'a self, key: &'a str) -> StoreFuture<'a, bool> {
        Box::pin(self.admin_call(key, &["reset"]))
    }

    fn inspect<'a>(&'a self, key: &'a str) -> StoreFuture<'a, KeyReport> {
        Box::pin(self.inspect_key(key))
    }

    fn stats(&self) -> StoreFuture<'_, Stats> {
        Box::pin(async move {
            Ok(Stats {
                tracked_keys: self.tracked_keys().await?,
                allowed: u128::from(self.allowed.load(Ordering::Relaxed)),
                rejected: u128::from(self.rejected.load(Ordering::Relaxed)),
            })
        })
    }

    fn reconfigure(&self, config: &LimiterConfig) -> Result<(), tollgate_core::ConfigError> {
        config.validate()?;
        // The default policy the sync task or `configure` stores at the
        // same moment is kept.
        Plans::update(&self.plans, |current| {
            Plans::new(config, current.default.policy, current.generation)
        })
        .map_err(|reason| tollgate_core::ConfigError::Policy {
            name: "limits".into(),
            reason,
        })?;
        self.tiers.lock().clear();
        Ok(())
    }
}

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
async fn sync_default_policy(
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
        let _: redis::RedisResult<bool> = connection.hset_nx(&self.key, "policy", &self.json).await;
        let read: redis::RedisResult<(Option<String>, Option<u64>)> = redis::cmd("HMGET")
            .arg(&self.key)
            .arg("policy")
            .arg("generation")
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

#[cfg(test)]
mod tests {
    use super::{RedisConfig, RedisStore, RedisStoreError, glob_escaped};
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

    #[test]
    fn prefixes_are_matched_literally() {
        assert_eq!(glob_escaped("tollgate"), "tollgate");
        assert_eq!(glob_escaped("a*b?[c]\\d"), "a\\*b\\?\\[c\\]\\\\d");
    }
}
