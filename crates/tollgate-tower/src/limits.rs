//! [`RateLimits`]: what every route of a host shares (the clock, the client-IP
//! rules, the host defaults), and the factory of route layers.

use std::sync::Arc;

use tollgate_core::{Clock, DEFAULT_MAX_TRACKED_KEYS, SystemClock};

use crate::host::HostDefaults;
use crate::key::ClientIpResolver;
use crate::rate_limit::{Buckets, Route, RouteLimit};

/// The rate limits of one host. Cheap to clone; every clone shares one state.
///
/// ```
/// use tollgate_tower::{Budget, KeySelector, RateLimits};
///
/// let limits = RateLimits::new();
/// let orders = limits.route("orders").budget(Budget::new(60, 5).unwrap()).key(KeySelector::Tenant);
/// let search = limits.route("search"); // host defaults, or no limit at all
/// # let _ = (orders, search);
/// ```
#[derive(Clone, Debug)]
pub struct RateLimits {
    shared: Arc<Shared>,
}

/// The state every route of a host shares.
pub(crate) struct Shared {
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) client_ip: ClientIpResolver,
    pub(crate) host: HostDefaults,
    pub(crate) max_tracked_keys: usize,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("client_ip", &self.client_ip)
            .field("host", &self.host)
            .field("max_tracked_keys", &self.max_tracked_keys)
            .finish_non_exhaustive()
    }
}

impl Default for RateLimits {
    fn default() -> Self {
        RateLimits::new()
    }
}

impl RateLimits {
    /// The system clock, no host defaults, no trusted proxies, IPv6 grouped by /64.
    pub fn new() -> Self {
        RateLimits::builder().build()
    }

    /// A builder to set the clock, host defaults, client-IP rules and key cap.
    pub fn builder() -> RateLimitsBuilder {
        RateLimitsBuilder {
            clock: Arc::new(SystemClock::new()),
            client_ip: ClientIpResolver::default(),
            host: HostDefaults::default(),
            max_tracked_keys: DEFAULT_MAX_TRACKED_KEYS,
        }
    }

    /// A layer for the route `name` (the `route` label of the denial counter and
    /// the policy name in the RateLimit headers). Without
    /// [`RouteLimit::budget`], the host defaults apply to it.
    pub fn route(&self, name: impl Into<String>) -> RouteLimit {
        let name: Arc<str> = Arc::from(name.into());
        let host = self.shared.host;
        let buckets = |budget| Arc::new(Buckets::new(&name, budget, self.shared.max_tracked_keys));
        let host_tenant = host.tenant.map(buckets);
        let host_ip = host.ip.map(buckets);
        RouteLimit::new(Route {
            name,
            shared: Arc::clone(&self.shared),
            own: None,
            selector: Default::default(),
            host_tenant,
            host_ip,
        })
    }
}

/// Builds [`RateLimits`].
pub struct RateLimitsBuilder {
    clock: Arc<dyn Clock>,
    client_ip: ClientIpResolver,
    host: HostDefaults,
    max_tracked_keys: usize,
}

impl std::fmt::Debug for RateLimitsBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimitsBuilder")
            .field("client_ip", &self.client_ip)
            .field("host", &self.host)
            .field("max_tracked_keys", &self.max_tracked_keys)
            .finish_non_exhaustive()
    }
}

impl RateLimitsBuilder {
    /// Where time comes from: [`SystemClock`] by default, a
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

    /// The most keys each route tracks at once (at least 1; default 1,000,000);
    /// see [`LimiterConfig::max_tracked_keys`](tollgate_core::LimiterConfig).
    pub fn max_tracked_keys(mut self, keys: usize) -> Self {
        self.max_tracked_keys = keys.max(1);
        self
    }

    /// The rate limits.
    pub fn build(self) -> RateLimits {
        RateLimits {
            shared: Arc::new(Shared {
                clock: self.clock,
                client_ip: self.client_ip,
                host: self.host,
                max_tracked_keys: self.max_tracked_keys,
            }),
        }
    }
}
