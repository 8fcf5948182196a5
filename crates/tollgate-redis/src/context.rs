//! What every operation of the Redis store works with (deciding in
//! [`store`](crate::store), the admin operations in [`admin`](crate::admin)):
//! the connection, the key prefix, the loaded scripts, the store's time,
//! Redis's clock for the calls' deadlines ([`redis_clock`]), the plans in
//! force, the tiers remembered per key, and the timeout every call to Redis
//! is held to.

pub(crate) mod redis_clock;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use parking_lot::Mutex;
use redis::Script;
use tollgate_core::{Policy, PolicyError, PreparedPolicy, StoreError};

use crate::connection::{self, Connection};
use crate::keys::{KeyNames, Space};
use crate::plans::{Plans, ScriptRule};
use redis_clock::RedisClock;

/// Tier assignments remembered per process before the cache starts afresh.
const TIER_CACHE: usize = 100_000;

/// Rules of policies given with requests kept before the cache starts afresh
/// (a configuration has few distinct policies; request overrides add some).
const RULE_CACHE: usize = 4_096;

/// The store's connection, scripts, settings and plans.
pub(crate) struct Context {
    pub(crate) connection: Connection,
    /// `lua/acquire.lua` and the algorithms.
    pub(crate) acquire: Arc<Script>,
    /// `lua/refund.lua`.
    pub(crate) refund: Arc<Script>,
    /// `lua/admin.lua`.
    pub(crate) admin: Script,
    /// `lua/configure.lua`.
    pub(crate) configure: Script,
    pub(crate) prefix: String,
    /// The HMAC key of limited keys' Redis names, when one is set.
    key_secret: Option<Arc<[u8]>>,
    /// How long one call may take.
    pub(crate) timeout: Duration,
    /// Microseconds as text for a script call;
    /// [`REDIS_TIME`](crate::protocol::REDIS_TIME) for Redis's `TIME`.
    pub(crate) now: Arc<dyn Fn() -> String + Send + Sync>,
    /// Redis's clock, whatever `now` is: the deadlines of script calls.
    pub(crate) clock: Arc<RedisClock>,
    pub(crate) plans: Arc<ArcSwap<Plans>>,
    /// The tier each plan's tier key was last seen to hold.
    tiers: Mutex<HashMap<String, Arc<str>>>,
    /// The script rule of each policy given with a request, built once
    /// (building one formats its version and checks its quantities).
    policy_rules: Mutex<HashMap<Policy, Arc<ScriptRule>>>,
}

impl Context {
    /// The context of a store; no tier remembered yet.
    pub(crate) fn new(
        connection: Connection,
        prefix: String,
        key_secret: Option<Arc<[u8]>>,
        timeout: Duration,
        now: Arc<dyn Fn() -> String + Send + Sync>,
        plans: Arc<ArcSwap<Plans>>,
    ) -> Self {
        Context {
            connection,
            acquire: Arc::new(crate::script::acquire()),
            refund: Arc::new(crate::script::refund()),
            admin: crate::script::admin(),
            configure: crate::script::configure(),
            prefix,
            key_secret,
            timeout,
            now,
            clock: Arc::new(RedisClock::new(timeout)),
            plans,
            tiers: Mutex::new(HashMap::new()),
            policy_rules: Mutex::new(HashMap::new()),
        }
    }

    /// The script rule of `policy`, a policy given with a request
    /// ([`ScriptRule::for_prepared`]), built on its first use and kept.
    ///
    /// # Errors
    ///
    /// [`PolicyError::Unsupported`] when a quantity could leave the range Lua
    /// computes exactly (nothing is kept then).
    pub(crate) fn policy_rule(
        &self,
        policy: &PreparedPolicy,
    ) -> Result<Arc<ScriptRule>, PolicyError> {
        let key = policy.policy();
        if let Some(rule) = self.policy_rules.lock().get(&key) {
            return Ok(Arc::clone(rule));
        }
        let rule = Arc::new(ScriptRule::for_prepared(policy)?);
        let mut rules = self.policy_rules.lock();
        if rules.len() >= RULE_CACHE {
            rules.clear();
        }
        rules.insert(key, Arc::clone(&rule));
        Ok(rule)
    }

    /// The tier last seen at the tier key `key`.
    pub(crate) fn remembered_tier(&self, key: &str) -> Option<Arc<str>> {
        self.tiers.lock().get(key).cloned()
    }

    /// Remembers that the tier key `key` holds `tier`.
    pub(crate) fn remember_tier(&self, key: &str, tier: Arc<str>) {
        let mut tiers = self.tiers.lock();
        if tiers.len() >= TIER_CACHE {
            tiers.clear();
        }
        tiers.insert(key.to_owned(), tier);
    }

    /// Forgets every tier remembered (the tiers were configured anew).
    pub(crate) fn forget_tiers(&self) {
        self.tiers.lock().clear();
    }

    /// When a call starting now must have ended: after the timeout, or (for a
    /// timeout too long to count from now) in a hundred years.
    pub(crate) fn deadline(&self) -> Instant {
        let now = Instant::now();
        now.checked_add(self.timeout)
            .or_else(|| now.checked_add(Duration::from_secs(100 * 365 * 86_400)))
            .unwrap_or(now)
    }

    /// `call`, or [`StoreError::Unavailable`] at `deadline`.
    pub(crate) async fn before<T>(
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

    /// The Redis names of `key` in `space`, under this store's prefix and key
    /// secret.
    pub(crate) fn names(&self, space: Space, key: &str) -> KeyNames {
        KeyNames::new(&self.prefix, space, key, self.key_secret.as_deref())
    }

    /// `call`, or [`StoreError::Unavailable`] after the timeout.
    pub(crate) async fn within<T>(
        &self,
        call: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        self.before(self.deadline(), call).await
    }

    /// A Redis command, its error as a [`StoreError`], within the timeout.
    pub(crate) async fn timed<T>(
        &self,
        call: impl Future<Output = redis::RedisResult<T>>,
    ) -> Result<T, StoreError> {
        let cluster = self.connection.is_cluster();
        self.within(async {
            call.await
                .map_err(|error| connection::unavailable(&error, cluster))
        })
        .await
    }
}
