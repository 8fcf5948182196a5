//! [`HostLimits`]: what every route of a host shares (the store, the clock,
//! the client-IP rules, the host defaults, the failure policy), and the
//! factory of route layers.

use std::sync::{Arc, Mutex};

use tollgate_core::{
    Clock, DEFAULT_MAX_TRACKED_KEYS, FailurePolicy, KeyRules, KnownKeys, LimiterConfig,
    MemorySlots, MemoryStore, PolicyError, SlotStore, Store, SystemClock, UnknownKeys,
};

use crate::budget::Budget;
use crate::host::HostDefaults;
use crate::in_flight::InFlightLimitLayer;
use crate::key::ClientIpResolver;
use crate::route_limit::{PreparedBudget, Route, RouteLimitLayer};

/// The rate limits of one host: the [`Store`] its routes' budgets live in
/// and what they share. Cheap to clone; every clone shares one state.
///
/// [`HostLimits::route`] makes the layer of one route.
///
/// ```
/// use tollgate_tower::{Budget, HostLimits, KeySelector};
///
/// let limits = HostLimits::new();
/// let orders = limits
///     .route("orders")
///     .budget(Budget::new(60, 5).unwrap())
///     .unwrap()
///     .key(KeySelector::Tenant);
/// let search = limits.route("search"); // host defaults, or no limit at all
/// # let _ = (orders, search);
/// ```
#[derive(Clone, Debug)]
pub struct HostLimits {
    shared: Arc<Shared>,
    /// The host defaults, prepared for the store (each route keys them apart).
    host_tenant: Option<PreparedBudget>,
    host_ip: Option<PreparedBudget>,
}

/// The state every route of a host shares.
pub(crate) struct Shared {
    pub(crate) store: Arc<dyn Store>,
    /// Whether the store answers every call at once (the in-memory store made
    /// by the builder): its decisions are then taken in `Service::call`,
    /// without boxing a future of the layer's own.
    pub(crate) immediate: bool,
    pub(crate) client_ip: ClientIpResolver,
    pub(crate) failure: FailurePolicy,
    /// The principals that exist, and what another gets.
    known_keys: Option<(Arc<KnownKeys>, UnknownKeys)>,
    /// Where concurrency slots are kept.
    pub(crate) slots: Arc<dyn SlotStore>,
    /// The requests waiting for their turn (a route's delay), per key.
    pub(crate) waiting: Arc<crate::route_limit::WaitingRoom>,
    /// The builder's own in-memory store, with the idle eviction it has now:
    /// raised to cover every budget made on it.
    memory: Option<(Arc<MemoryStore>, Mutex<LimiterConfig>)>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("immediate", &self.immediate)
            .field("client_ip", &self.client_ip)
            .field("failure", &self.failure)
            .finish_non_exhaustive()
    }
}

impl Shared {
    /// The rules of known keys, when a list is kept.
    pub(crate) fn key_rules(&self) -> Option<KeyRules<'_>> {
        self.known_keys.as_ref().map(|(known, unknown)| KeyRules {
            known: Some(known),
            unknown: *unknown,
        })
    }

    /// The store's identity (the address of its data): layers on one store
    /// decide together.
    pub(crate) fn store_id(&self) -> usize {
        Arc::as_ptr(&self.store).cast::<()>() as usize
    }

    /// `budget` prepared for the store, for the route `route`.
    pub(crate) fn prepare(
        &self,
        route: &str,
        budget: Budget,
    ) -> Result<PreparedBudget, PolicyError> {
        self.cover(budget);
        PreparedBudget::new(self.store.as_ref(), route, budget)
    }

    /// Makes the builder's in-memory store keep a key's state at least as
    /// long as `budget`'s bucket takes to fill, so forgetting an idle key
    /// changes no decision.
    fn cover(&self, budget: Budget) {
        self.cover_seconds(budget.seconds_to_fill());
    }

    /// Makes the builder's in-memory store keep a key's state at least as
    /// long as `budget`'s bucket takes to fill after a wait of `delay`: a
    /// request waiting for its turn marks its key used when it arrives, and
    /// its turn counts from when it is served.
    pub(crate) fn cover_delay(&self, budget: Budget, delay: std::time::Duration) {
        let delay_s = delay.as_secs() + u64::from(delay.subsec_nanos() > 0);
        self.cover_seconds(budget.seconds_to_fill().saturating_add(delay_s));
    }

    fn cover_seconds(&self, needed: u64) {
        let Some((store, config)) = &self.memory else {
            return;
        };
        let mut config = config
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if needed > config.idle_eviction_s {
            config.idle_eviction_s = needed;
            // Only the idle eviction changes, to a valid value: this cannot fail.
            let _ = store.reconfigure(&config);
        }
    }
}

impl Default for HostLimits {
    fn default() -> Self {
        HostLimits::new()
    }
}

impl HostLimits {
    /// An in-memory store on the system clock, no host defaults, no trusted
    /// proxies, IPv6 grouped by /64, failing open.
    pub fn new() -> Self {
        HostLimits::builder()
            .build()
            .expect("no host defaults: nothing to prepare")
    }

    /// A builder to set the store, clock, host defaults, client-IP rules,
    /// key cap and failure policy.
    pub fn builder() -> HostLimitsBuilder {
        HostLimitsBuilder {
            store: None,
            clock: Arc::new(SystemClock::new()),
            client_ip: ClientIpResolver::default(),
            host: HostDefaults::default(),
            max_tracked_keys: DEFAULT_MAX_TRACKED_KEYS,
            failure: FailurePolicy::default(),
            known_keys: None,
            slots: None,
        }
    }

    /// A concurrency limit for the route `name`: at most `max` requests of
    /// one key in flight at once (clamped to 1 to 2^32), keyed as
    /// [`InFlightLimitLayer::key`] says; its slots live in the host's slot
    /// store ([`HostLimitsBuilder::slots`]). Stack it with
    /// [`HostLimits::route`]'s layer, outside it, so that a request refused
    /// for a slot uses no rate budget.
    pub fn in_flight(&self, name: impl Into<String>, max: u64) -> InFlightLimitLayer {
        InFlightLimitLayer {
            name: Arc::from(name.into()),
            max: max.clamp(1, tollgate_core::MAX_IN_FLIGHT),
            selector: Default::default(),
            shared: Arc::clone(&self.shared),
        }
    }

    /// The concurrency slots held now, over every key of every
    /// [`HostLimits::in_flight`] layer of this host.
    pub fn slots_held(&self) -> u64 {
        self.shared.slots.held()
    }

    /// The requests of this host's routes waiting for their turn now (a
    /// [`RouteLimitLayer::delay`]), over every key: 0 once none waits and
    /// every turn not served has been given back.
    pub fn requests_waiting(&self) -> u64 {
        self.shared.waiting.waiting()
    }

    /// The layer of the route `name`: the `route` label of the metrics, the
    /// policy name in the RateLimit fields, and the start of its store keys
    /// (`{name}/{kind}:{value}`; two layers with one name on one store share
    /// their budgets). Without [`RouteLimitLayer::budget`], the host
    /// defaults apply to it.
    pub fn route(&self, name: impl Into<String>) -> RouteLimitLayer {
        let name: Arc<str> = Arc::from(name.into());
        let named = |budget: &PreparedBudget| budget.for_route(&name);
        RouteLimitLayer::new(Route {
            host_tenant: self.host_tenant.as_ref().map(named),
            host_ip: self.host_ip.as_ref().map(named),
            name,
            shared: Arc::clone(&self.shared),
            own: None,
            selector: Default::default(),
            cost: 1,
            max_wait: std::time::Duration::ZERO,
            max_waiting: crate::route_limit::DEFAULT_MAX_WAITING,
            charge: None,
        })
    }
}

/// Builds [`HostLimits`].
pub struct HostLimitsBuilder {
    store: Option<Arc<dyn Store>>,
    clock: Arc<dyn Clock>,
    client_ip: ClientIpResolver,
    host: HostDefaults,
    max_tracked_keys: usize,
    failure: FailurePolicy,
    known_keys: Option<(Arc<KnownKeys>, UnknownKeys)>,
    slots: Option<Arc<dyn SlotStore>>,
}

impl std::fmt::Debug for HostLimitsBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostLimitsBuilder")
            .field("store", &self.store.as_ref().map(|_| "custom"))
            .field("client_ip", &self.client_ip)
            .field("host", &self.host)
            .field("max_tracked_keys", &self.max_tracked_keys)
            .field("failure", &self.failure)
            .finish_non_exhaustive()
    }
}

impl HostLimitsBuilder {
    /// Where the budgets live: any [`Store`], such as
    /// `tollgate_redis::RedisStore` to share them between processes (as
    /// `tollgate serve` does). The store keeps its own time and its own
    /// memory bounds: [`clock`](Self::clock) and
    /// [`max_tracked_keys`](Self::max_tracked_keys) then do not apply, and
    /// its idle eviction (a Redis store's TTLs are exact) must not forget a
    /// key before its bucket is full again. Default: an in-memory
    /// [`MemoryStore`] on the builder's clock with the builder's key cap.
    pub fn store(mut self, store: Arc<dyn Store>) -> Self {
        self.store = Some(store);
        self
    }

    /// The in-memory store's clock: [`SystemClock`] by default, a
    /// [`ManualClock`](tollgate_core::ManualClock) in tests. Nanoseconds.
    pub fn clock(mut self, clock: impl Clock + 'static) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// Default budgets for routes that declare none.
    pub fn host_defaults(mut self, host: HostDefaults) -> Self {
        self.host = host;
        self
    }

    /// How the client IP is found (trusted proxies, IPv6 prefix).
    pub fn client_ip(mut self, client_ip: ClientIpResolver) -> Self {
        self.client_ip = client_ip;
        self
    }

    /// The most keys the in-memory store tracks at once, over every route of
    /// the host (at least 1; default 1,000,000); see
    /// [`LimiterConfig::max_tracked_keys`].
    pub fn max_tracked_keys(mut self, keys: usize) -> Self {
        self.max_tracked_keys = keys.max(1);
        self
    }

    /// What a store failure does to a request (default
    /// [`FailurePolicy::FailOpen`]). The layer that asks the store (the
    /// outermost of stacked layers) applies its own.
    pub fn failure_policy(mut self, failure: FailurePolicy) -> Self {
        self.failure = failure;
        self
    }

    /// Where the concurrency slots of [`HostLimits::in_flight`] layers are
    /// kept (default: in this process, [`MemorySlots`]; a
    /// `tollgate_redis::RedisSlots` shares them between processes).
    pub fn slots(mut self, slots: Arc<dyn SlotStore>) -> Self {
        self.slots = Some(slots);
        self
    }

    /// The principals that exist ([`KnownKeys`], read from the same file
    /// as the gateway's `[keys] known`), and what a request whose
    /// [`Principal`](crate::Principal) is not among them gets
    /// ([`UnknownKeys`]): refused (401) before any budget is used, or
    /// anonymous (held per client IP: to the route's own budget, whatever
    /// it is keyed by, else to the host's per-IP default, as core's
    /// `RouteBudgets::choose_keyless` picks). Without it (the default), every
    /// principal is taken as it comes. A request without a principal is
    /// unaffected.
    pub fn known_keys(mut self, known: Arc<KnownKeys>, unknown: UnknownKeys) -> Self {
        self.known_keys = Some((known, unknown));
        self
    }

    /// The host limits.
    ///
    /// # Errors
    ///
    /// [`PolicyError`] when the store cannot use a host default (a Redis
    /// store refuses budgets whose numbers could pass 2^52).
    pub fn build(self) -> Result<HostLimits, PolicyError> {
        let (store, memory): (Arc<dyn Store>, _) = match self.store {
            Some(store) => (store, None),
            None => {
                let fill =
                    |budget: Option<Budget>| budget.map_or(1, |budget| budget.seconds_to_fill());
                let config = LimiterConfig {
                    policy_lists: Default::default(),
                    tiers: Default::default(),
                    exempt_keys: Vec::new(),
                    idle_eviction_s: fill(self.host.tenant).max(fill(self.host.ip)),
                    max_tracked_keys: self.max_tracked_keys,
                    ..LimiterConfig::default()
                };
                let store = MemoryStore::new(&config, self.clock)
                    .expect("an in-memory store of valid settings");
                let store = Arc::new(store);
                (
                    Arc::clone(&store) as Arc<dyn Store>,
                    Some((store, Mutex::new(config))),
                )
            }
        };
        let shared = Shared {
            immediate: memory.is_some(),
            store,
            client_ip: self.client_ip,
            failure: self.failure,
            known_keys: self.known_keys,
            slots: self
                .slots
                .unwrap_or_else(|| Arc::new(MemorySlots::new()) as Arc<dyn SlotStore>),
            waiting: Arc::default(),
            memory,
        };
        // Prepared under a placeholder name: each route renames its copy.
        let prepare =
            |budget: Option<Budget>| budget.map(|budget| shared.prepare("", budget)).transpose();
        let host_tenant = prepare(self.host.tenant)?;
        let host_ip = prepare(self.host.ip)?;
        Ok(HostLimits {
            shared: Arc::new(shared),
            host_tenant,
            host_ip,
        })
    }
}
