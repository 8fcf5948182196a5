//! [`Store`]: where a server keeps its limits, behind one async,
//! object-safe interface: [`MemoryStore`] in one process, a Redis store when
//! several processes share one budget.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::clock::Clock;
use crate::config::{ConfigError, LimiterConfig};
use crate::decision::Decision;
use crate::limiter::{
    Limit, LimitDecision, LimitUnits, Limiter, PolicyReport, PreparedPolicy, Reservation, Stats,
    UnknownTier,
};
use crate::plan::PlanPolicies;
use crate::policy::{Policy, PolicyError};
use crate::reach::Reach;
use crate::resolution::Resolution;
use crate::tier_defaults::MaxWait;

/// The future every [`Store`] call returns.
pub type StoreFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'a>>;

/// Why a store call failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The store could not be reached or answered in time (a Redis store);
    /// the caller applies its failure policy.
    #[error("the limit store is unavailable: {0}")]
    Unavailable(String),
    /// `assign_tier` named a tier that is neither configured nor `default`.
    #[error(transparent)]
    UnknownTier(#[from] UnknownTier),
    /// `configure` was given a policy the store cannot use.
    #[error("invalid policy: {0}")]
    Policy(PolicyError),
}

impl From<PolicyError> for StoreError {
    fn from(error: PolicyError) -> Self {
        StoreError::Policy(error)
    }
}

/// What the store knows of one API key, read without using its budget.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyReport {
    /// The key's tier, `default` when it has none.
    pub tier: String,
    /// The policy limiting it; `None` when the key is exempt.
    pub policy: Option<Policy>,
    /// Its budget now; `None` when it holds no state (its whole budget is
    /// available).
    pub state: Option<Decision>,
    /// For a plan written as a list, the name of its first policy (the one
    /// `policy` and `state` are of); `None` otherwise.
    pub policy_name: Option<String>,
    /// For a plan written as a list, every policy after the first, with its
    /// budget; empty otherwise.
    pub further: Vec<PolicyReport>,
}

/// Where limits live. Every method is async so a networked store fits; the
/// in-memory one answers at once. All times come from the store's own clock.
pub trait Store: Send + Sync {
    /// Compiles a policy for [`Limit::Policy`].
    ///
    /// # Errors
    ///
    /// [`PolicyError`] when the store cannot use it.
    fn prepare(&self, policy: Policy) -> Result<PreparedPolicy, PolicyError>;

    /// One request held to every limit at once, all or nothing; see
    /// [`Limiter::acquire`].
    fn acquire<'a>(&'a self, limits: &'a [Limit<'a>]) -> StoreFuture<'a, Vec<LimitDecision>>;

    /// One unit of a lone `limit`, decided here and now when the store can
    /// answer without waiting (the in-memory store does: no future, no
    /// `Vec`); `None` when it cannot, and [`Store::acquire`] must be used.
    /// When `Some`, the same decision as `acquire(&[limit])` would give.
    fn acquire_one_now(&self, limit: &Limit<'_>) -> Option<LimitDecision> {
        let _ = limit;
        None
    }

    /// One request held to every limit at once, each charged its own units:
    /// limits whose policy counts refused units are always charged theirs
    /// (each decides alone, as envoyproxy/ratelimit's descriptors do); the
    /// others are all or nothing among themselves; `units = 0` only looks. See
    /// [`Limiter::acquire_units`] for the whole rule. One decision per limit,
    /// in order.
    ///
    /// The default implementation, for stores written before this method,
    /// serves every limit with one unit through [`Store::acquire`] and answers
    /// any other request with [`StoreError::Unavailable`];
    /// [`MemoryStore`] and the Redis store decide every request.
    fn acquire_units<'a>(
        &'a self,
        limits: &'a [LimitUnits<'a>],
    ) -> StoreFuture<'a, Vec<LimitDecision>> {
        if limits.iter().any(|limit| limit.units != 1) {
            return ready(Err(StoreError::Unavailable(
                "this store decides one unit per limit only".into(),
            )));
        }
        let limits: Vec<Limit<'a>> = limits.iter().map(|limit| limit.limit).collect();
        Box::pin(async move { self.acquire(&limits).await })
    }

    /// Gives back to each limit its units (a refund: an Envoy descriptor's
    /// `is_negative_hits`), each limit on its own and never past what its
    /// policy allows; see [`Limiter::give_back_units`] for the rule and the
    /// decisions (what a look sees after the refund). One decision per
    /// limit, in order. A store may give back limit by limit, so when it
    /// fails part of a call may have been given back.
    ///
    /// The default implementation, for stores written before this method,
    /// answers [`StoreError::Unavailable`]; [`MemoryStore`] and the Redis
    /// store give back.
    fn give_back_units<'a>(
        &'a self,
        limits: &'a [LimitUnits<'a>],
    ) -> StoreFuture<'a, Vec<LimitDecision>> {
        let _ = limits;
        ready(Err(StoreError::Unavailable(
            "this store cannot give units back".into(),
        )))
    }

    /// Charges each limit its units whatever it has left, into a debt of at
    /// most `overdraft` units (a request's usage settled after its
    /// response); see [`Limiter::overdraw_units`] for the rule and the
    /// decisions (what a look sees after the charge). One decision per
    /// limit, in order; a store may charge limit by limit.
    ///
    /// The default implementation answers [`StoreError::Unavailable`];
    /// [`MemoryStore`] and the Redis store charge.
    fn overdraw_units<'a>(
        &'a self,
        limits: &'a [LimitUnits<'a>],
        overdraft: u64,
    ) -> StoreFuture<'a, Vec<LimitDecision>> {
        let _ = (limits, overdraft);
        ready(Err(StoreError::Unavailable(
            "this store cannot charge after the response".into(),
        )))
    }

    /// One request held to every limit at once, waiting up to `max_wait`
    /// for its turn rather than refused (a duration, or its plan's tier
    /// delay: [`MaxWait`]): see [`Limiter::reserve_units`] and
    /// [`Limiter::reserve_units_within`] for the rule. The caller waits [`Reservation::wait`] before serving it,
    /// and gives the units back with [`Store::cancel_reservation`] when it
    /// will not serve it after all.
    ///
    /// The default implementation, for stores written before this method,
    /// answers [`StoreError::Unavailable`]; [`MemoryStore`] and the Redis
    /// store reserve.
    fn reserve_units<'a>(
        &'a self,
        limits: &'a [LimitUnits<'a>],
        max_wait: MaxWait,
    ) -> StoreFuture<'a, Reservation> {
        let _ = (limits, max_wait);
        ready(Err(StoreError::Unavailable(
            "this store cannot reserve".into(),
        )))
    }

    /// Gives back a reservation's units (the same `limits` as
    /// [`Store::reserve_units`] was given, and its
    /// [`Reservation::counted_at`]), for a request that will not be served:
    /// see [`Limiter::cancel_reservation`]. The units each limit got back.
    ///
    /// The default implementation answers [`StoreError::Unavailable`].
    fn cancel_reservation<'a>(
        &'a self,
        limits: &'a [LimitUnits<'a>],
        counted_at: u64,
    ) -> StoreFuture<'a, Vec<u64>> {
        let _ = (limits, counted_at);
        ready(Err(StoreError::Unavailable(
            "this store cannot give a reservation back".into(),
        )))
    }

    /// Whether `key` is exempt from its plan.
    fn is_exempt(&self, key: &str) -> bool;

    /// The default policy in force.
    fn default_policy(&self) -> StoreFuture<'_, Policy>;

    /// Replaces the default policy; see [`Limiter::configure`].
    fn configure(&self, policy: Policy) -> StoreFuture<'_, Policy>;

    /// The default plan in force: one policy, or a list of named policies.
    ///
    /// The default implementation, for stores written before plans could be
    /// lists, answers [`Store::default_policy`] as the one-policy form.
    fn default_plan(&self) -> StoreFuture<'_, PlanPolicies> {
        Box::pin(async move { self.default_policy().await.map(PlanPolicies::One) })
    }

    /// Replaces the default plan, one policy or a list of named policies;
    /// see [`Limiter::configure_plan`].
    ///
    /// The default implementation, for stores written before plans could be
    /// lists, puts a one-policy plan in force with [`Store::configure`] and
    /// answers a list with [`StoreError::Unavailable`].
    fn configure_plan(&self, plan: PlanPolicies) -> StoreFuture<'_, PlanPolicies> {
        match plan {
            PlanPolicies::One(policy) => {
                Box::pin(async move { self.configure(policy).await.map(PlanPolicies::One) })
            }
            PlanPolicies::List(_) => ready(Err(StoreError::Unavailable(
                "this store holds a one-policy default plan only".into(),
            ))),
        }
    }

    /// Puts `key` on `tier`; see [`Limiter::assign_tier`].
    fn assign_tier<'a>(&'a self, key: &'a str, tier: &'a str) -> StoreFuture<'a, ()>;

    /// Drops `key`'s limiter state; whether it had any.
    fn reset<'a>(&'a self, key: &'a str) -> StoreFuture<'a, bool>;

    /// `key`'s tier, policy and budget, using none of it.
    fn inspect<'a>(&'a self, key: &'a str) -> StoreFuture<'a, KeyReport>;

    /// Totals, after dropping idle keys.
    fn stats(&self) -> StoreFuture<'_, Stats>;

    /// Whether the store can decide now (a Redis store pings its server
    /// within its timeout); the in-memory store always can.
    ///
    /// # Errors
    ///
    /// [`StoreError::Unavailable`] with the reason (never a password).
    fn check(&self) -> StoreFuture<'_, ()> {
        Box::pin(std::future::ready(Ok(())))
    }

    /// How much of the store can decide now ([`Reach`]): a store on one
    /// server reaches all of it or nothing ([`Store::check`]); a Redis
    /// Cluster counts the hash slots whose primary answered, so that a node
    /// down or stalled is told from the whole store down.
    ///
    /// # Errors
    ///
    /// [`StoreError::Unavailable`] with the reason when no part of the store
    /// can decide.
    fn reach(&self) -> StoreFuture<'_, Reach> {
        Box::pin(async move {
            self.check().await?;
            Ok(Reach::WHOLE)
        })
    }

    /// Puts a reloaded configuration in force; see [`Limiter::reconfigure`].
    ///
    /// # Errors
    ///
    /// [`ConfigError`] when it is invalid; nothing changes then.
    fn reconfigure(&self, config: &LimiterConfig) -> Result<(), ConfigError>;
}

/// The in-memory store: a [`Limiter`] on a nanosecond clock.
pub struct MemoryStore {
    limiter: Limiter,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryStore")
            .field("limiter", &self.limiter)
            .finish_non_exhaustive()
    }
}

impl MemoryStore {
    /// A store limiting by `config`, taking its time from `clock`.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] when the configuration is invalid.
    pub fn new(config: &LimiterConfig, clock: Arc<dyn Clock>) -> Result<Self, ConfigError> {
        Ok(MemoryStore {
            limiter: Limiter::new(config, Resolution::Nanoseconds)?,
            clock,
        })
    }

    /// The limiter behind the store.
    pub fn limiter(&self) -> &Limiter {
        &self.limiter
    }

    fn now(&self) -> u64 {
        self.clock.now_nanos()
    }
}

fn ready<'a, T: Send + 'a>(value: Result<T, StoreError>) -> StoreFuture<'a, T> {
    Box::pin(std::future::ready(value))
}

impl Store for MemoryStore {
    fn prepare(&self, policy: Policy) -> Result<PreparedPolicy, PolicyError> {
        self.limiter.prepare(policy)
    }

    fn acquire_one_now(&self, limit: &Limit<'_>) -> Option<LimitDecision> {
        Some(self.limiter.acquire_one(limit, self.now()))
    }

    fn acquire<'a>(&'a self, limits: &'a [Limit<'a>]) -> StoreFuture<'a, Vec<LimitDecision>> {
        ready(Ok(self.limiter.acquire(limits, self.now())))
    }

    fn acquire_units<'a>(
        &'a self,
        limits: &'a [LimitUnits<'a>],
    ) -> StoreFuture<'a, Vec<LimitDecision>> {
        ready(Ok(self.limiter.acquire_units(limits, self.now())))
    }

    fn give_back_units<'a>(
        &'a self,
        limits: &'a [LimitUnits<'a>],
    ) -> StoreFuture<'a, Vec<LimitDecision>> {
        ready(Ok(self.limiter.give_back_units(limits, self.now())))
    }

    fn overdraw_units<'a>(
        &'a self,
        limits: &'a [LimitUnits<'a>],
        overdraft: u64,
    ) -> StoreFuture<'a, Vec<LimitDecision>> {
        ready(Ok(self.limiter.overdraw_units(
            limits,
            overdraft,
            self.now(),
        )))
    }

    fn reserve_units<'a>(
        &'a self,
        limits: &'a [LimitUnits<'a>],
        max_wait: MaxWait,
    ) -> StoreFuture<'a, Reservation> {
        let max_wait = match max_wait {
            MaxWait::UpTo(max_wait) => {
                Some(self.limiter.resolution().ticks_from_duration(max_wait))
            }
            MaxWait::TierDelay => None,
        };
        ready(Ok(self.limiter.reserve_units_within(
            limits,
            self.now(),
            max_wait,
        )))
    }

    fn cancel_reservation<'a>(
        &'a self,
        limits: &'a [LimitUnits<'a>],
        counted_at: u64,
    ) -> StoreFuture<'a, Vec<u64>> {
        ready(Ok(self.limiter.cancel_reservation(
            limits,
            self.now(),
            counted_at,
        )))
    }

    fn is_exempt(&self, key: &str) -> bool {
        self.limiter.is_exempt(key)
    }

    fn default_policy(&self) -> StoreFuture<'_, Policy> {
        ready(Ok(self.limiter.default_policy()))
    }

    fn configure(&self, policy: Policy) -> StoreFuture<'_, Policy> {
        ready(self.limiter.configure(policy).map_err(StoreError::from))
    }

    fn default_plan(&self) -> StoreFuture<'_, PlanPolicies> {
        ready(Ok(self.limiter.default_plan()))
    }

    fn configure_plan(&self, plan: PlanPolicies) -> StoreFuture<'_, PlanPolicies> {
        ready(self.limiter.configure_plan(&plan).map_err(StoreError::from))
    }

    fn assign_tier<'a>(&'a self, key: &'a str, tier: &'a str) -> StoreFuture<'a, ()> {
        ready(
            self.limiter
                .assign_tier(key, tier)
                .map_err(StoreError::from),
        )
    }

    fn reset<'a>(&'a self, key: &'a str) -> StoreFuture<'a, bool> {
        ready(Ok(self.limiter.reset(key, self.now())))
    }

    fn inspect<'a>(&'a self, key: &'a str) -> StoreFuture<'a, KeyReport> {
        let now = self.now();
        let (policy_name, further) = self.limiter.inspect_further(key, now);
        let report = KeyReport {
            tier: self.limiter.tier_of(key),
            policy: self.limiter.policy_for(key),
            state: self.limiter.inspect(key, now),
            policy_name,
            further,
        };
        ready(Ok(report))
    }

    fn stats(&self) -> StoreFuture<'_, Stats> {
        ready(Ok(self.limiter.stats(self.now())))
    }

    fn reconfigure(&self, config: &LimiterConfig) -> Result<(), ConfigError> {
        self.limiter.reconfigure(config)
    }
}
