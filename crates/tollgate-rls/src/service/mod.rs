//! The rate limit service: envoyproxy/ratelimit's `ShouldRateLimit`
//! (src/service/ratelimit.go) on tollgate's [`Store`]. Every decision is the
//! store's (a fixed window that counts refused hits, as the Go service's Redis
//! `INCRBY` does); this module translates a request into store calls and the
//! store's decisions into the Go service's statuses, stats and answer.
//!
//! ```
//! use std::sync::Arc;
//! use tollgate_core::{LimiterConfig, ManualClock, MemoryStore, Store};
//! use tollgate_rls::proto::{Code, Entry, RateLimitDescriptor, RateLimitRequest};
//! use tollgate_rls::{LoaderOptions, RateLimitConfig, RateLimitService, ServiceSettings};
//!
//! let yaml = "domain: edge\ndescriptors:\n  - key: ip\n    rate_limit: {unit: minute, requests_per_unit: 1}\n";
//! let config = RateLimitConfig::from_sources(&[("edge.yaml", yaml)], &LoaderOptions::default()).unwrap();
//! let clock = Arc::new(ManualClock::new(120_000_000_000));
//! let store: Arc<dyn Store> = Arc::new(MemoryStore::new(&LimiterConfig::default(), clock.clone()).unwrap());
//! let service = RateLimitService::new(store, config, ServiceSettings::default(), clock);
//! let request = RateLimitRequest {
//!     domain: "edge".into(),
//!     descriptors: vec![RateLimitDescriptor { entries: vec![Entry::new("ip", "10.0.0.1")], ..Default::default() }],
//!     hits_addend: 0,
//! };
//! use tollgate_rls::harness::block_on;
//! assert_eq!(block_on(service.should_rate_limit(&request)).unwrap().overall_code, Code::Ok);
//! assert_eq!(block_on(service.should_rate_limit(&request)).unwrap().overall_code, Code::OverLimit);
//! assert_eq!(service.stats()["ratelimit.service.rate_limit.edge.ip.over_limit"], 1);
//! ```

mod aggregate;
mod cache;
mod counter;
mod dynamic_metadata;
mod failure;
pub mod harness;
mod headers_to_add;
mod held;
mod local_cache;
mod overdraft;
mod plan;
mod policies;
mod refunds;
mod service_settings;
pub mod service_stats;
mod store_key;

#[cfg(test)]
mod aggregate_cases;

use std::collections::BTreeMap;
use std::sync::Arc;

use arc_swap::ArcSwapOption;
use tollgate_core::{Clock, Store};

use crate::config::files::ReloadTarget;
use crate::config::stats::{MemoryStats, StatsSink};
use crate::config::tree::RateLimitConfig;
use crate::proto::{RateLimitRequest, RateLimitResponse};
use held::Held;
use local_cache::LocalCache;
use plan::Plan;
use policies::PreparedPolicies;
pub use service_settings::{Extensions, ServiceSettings};

/// Why `ShouldRateLimit` failed; the text is the Go service's message, which
/// its gRPC server returns with code `UNKNOWN` (and its `/json` endpoint as a
/// 400). Envoy then applies its `failure_mode_deny`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ServiceError {
    /// The request's `domain` is empty.
    #[error("rate limit domain must not be empty")]
    EmptyDomain,
    /// The request has no descriptors.
    #[error("rate limit descriptor list must not be empty")]
    NoDescriptors,
    /// No configuration has been loaded (a service started without one).
    #[error("no rate limit configuration loaded")]
    NoConfiguration,
    /// Descriptor `index`'s `limit` override has unit `UNKNOWN` (or a number
    /// the protocol does not name). The Go service panics there
    /// (`UnitToDivider`: "should not get here"); tollgate refuses the request.
    #[error("descriptor {index}: rate limit override has no unit")]
    UnknownUnit {
        /// The descriptor's index in the request.
        index: usize,
    },
    /// The store failed; the text is its message, as the Go service passes on
    /// Redis's.
    #[error("{0}")]
    Store(String),
}

impl ServiceError {
    /// Whether the store failed (counted as `redis_error`) rather than the
    /// request or the service (`service_error`).
    pub fn is_store_error(&self) -> bool {
        matches!(self, ServiceError::Store(_))
    }

    /// The counter the error moves (full statsd name).
    pub fn stat_name(&self) -> &'static str {
        if self.is_store_error() {
            service_stats::REDIS_ERROR
        } else {
            service_stats::SERVICE_ERROR
        }
    }
}

/// Envoy's rate limit service on a tollgate [`Store`]. Cheap to share behind an
/// `Arc`; every method takes `&self`.
pub struct RateLimitService {
    store: Arc<dyn Store>,
    config: ArcSwapOption<RateLimitConfig>,
    settings: ServiceSettings,
    clock: Arc<dyn Clock>,
    stats: Arc<MemoryStats>,
    policies: PreparedPolicies,
    local_cache: LocalCache,
}

impl std::fmt::Debug for RateLimitService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimitService")
            .field("config", &self.config.load().is_some())
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl RateLimitService {
    /// A service deciding through `store` with `config` in force (counted as
    /// a configuration load, `config_load_success`, as the Go service counts
    /// its first load), reading the time (for windows and resets) from
    /// `clock`, which should be the store's.
    pub fn new(
        store: Arc<dyn Store>,
        config: RateLimitConfig,
        settings: ServiceSettings,
        clock: Arc<dyn Clock>,
    ) -> RateLimitService {
        let service = RateLimitService::without_config(store, settings, clock);
        service.reload(config);
        service
    }

    /// A service with no configuration yet (the Go service's
    /// `FORCE_START_WITHOUT_INITIAL_CONFIG`): every request fails with
    /// [`ServiceError::NoConfiguration`] until [`RateLimitService::reload`].
    pub fn without_config(
        store: Arc<dyn Store>,
        settings: ServiceSettings,
        clock: Arc<dyn Clock>,
    ) -> RateLimitService {
        RateLimitService {
            local_cache: LocalCache::new(settings.local_cache_size_bytes),
            store,
            config: ArcSwapOption::empty(),
            settings,
            clock,
            stats: Arc::new(MemoryStats::new()),
            policies: PreparedPolicies::default(),
        }
    }

    /// Puts `config` in force for the requests that start from now on
    /// (`config_load_success` + 1). Requests under way finish with the
    /// configuration they started with.
    pub fn reload(&self, config: RateLimitConfig) {
        self.config.store(Some(Arc::new(config)));
        self.stats.add(service_stats::CONFIG_LOAD_SUCCESS, 1);
    }

    /// Records a reload that failed (`config_load_error` + 1); the
    /// configuration in force stays.
    pub fn reload_failed(&self) {
        self.stats.add(service_stats::CONFIG_LOAD_ERROR, 1);
    }

    /// Whether a configuration is in force.
    pub fn has_config(&self) -> bool {
        self.config.load().is_some()
    }

    /// Whether a configuration of at least one domain is in force (the Go
    /// service's health `config` component).
    pub fn config_has_domains(&self) -> bool {
        self.config
            .load()
            .as_ref()
            .is_some_and(|config| !config.is_empty())
    }

    /// The configuration in force as the debug listener's `/rlconfig` prints
    /// it ([`RateLimitConfig::dump`]); empty when none is loaded, as the Go
    /// service's page is.
    pub fn config_dump(&self) -> String {
        self.config
            .load()
            .as_deref()
            .map(RateLimitConfig::dump)
            .unwrap_or_default()
    }

    /// The settings the service runs with.
    pub fn settings(&self) -> &ServiceSettings {
        &self.settings
    }

    /// Every counter counted so far that is not 0, by full statsd name:
    /// `ratelimit.service.rate_limit.<stats key>.total_hits` (and
    /// `over_limit`, `near_limit`, `within_limit`, `shadow_mode`,
    /// `over_limit_with_local_cache`), `ratelimit.service.rate_limit.<domain>.domain_not_found`,
    /// `ratelimit.service.config_load_success`, `config_load_error`,
    /// `global_shadow_mode`, `call.should_rate_limit.redis_error` and
    /// `service_error`; with `TOLLGATE_REFUNDS`, `<stats key>.refunded_hits`.
    pub fn stats(&self) -> BTreeMap<String, u64> {
        let mut stats = self.stats.snapshot();
        stats.retain(|_, value| *value != 0);
        stats
    }

    /// `ShouldRateLimit`: every descriptor decided (charged its hits, as the
    /// Go service charges each descriptor whatever the others decide) and the
    /// answer built as the Go service builds it. When the store fails and
    /// [`Extensions::store_failure`] names a policy, the answer is that
    /// policy's (and the failure is counted) rather than an error.
    ///
    /// Work is linear in the request's size: one lookup per descriptor and one
    /// store call (two with `STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT`).
    ///
    /// # Errors
    ///
    /// [`ServiceError`], counted in `service_error` or `redis_error`.
    pub async fn should_rate_limit(
        &self,
        request: &RateLimitRequest,
    ) -> Result<RateLimitResponse, ServiceError> {
        let result = self.decide(request).await;
        if let Err(error) = &result {
            self.stats.add(error.stat_name(), 1);
        }
        result
    }

    async fn decide(&self, request: &RateLimitRequest) -> Result<RateLimitResponse, ServiceError> {
        if request.domain.is_empty() {
            return Err(ServiceError::EmptyDomain);
        }
        if request.descriptors.is_empty() {
            return Err(ServiceError::NoDescriptors);
        }
        let config = self
            .config
            .load_full()
            .ok_or(ServiceError::NoConfiguration)?;
        let now_s = self.clock.now_nanos() / 1_000_000_000;
        let plans = plan::plans(&config, request, &self.settings, self.stats.as_ref())?;
        let checked = match self.check_and_refund(request, &plans, now_s).await {
            Ok(checked) => checked,
            Err(error) if error.is_store_error() => {
                let Some(policy) = self.settings.extensions.store_failure else {
                    return Err(error);
                };
                tracing::debug!(%error, policy = policy.label(), "the store failed");
                return Ok(failure::respond(
                    &plans,
                    policy,
                    &self.settings,
                    self.stats.as_ref(),
                ));
            }
            Err(error) => return Err(error),
        };
        let held: Vec<Held<'_>> = plans.iter().map(held).collect();
        Ok(aggregate::respond(
            request,
            &checked,
            &held,
            &self.settings,
            now_s,
            self.stats.as_ref(),
        ))
    }
}

/// What [`watch_config`](crate::watch_config) reloads: the service.
impl ReloadTarget for RateLimitService {
    fn reloaded(&self, config: RateLimitConfig) {
        self.reload(config);
    }

    fn reload_failed(&self) {
        RateLimitService::reload_failed(self);
    }
}

fn held(plan: &Plan) -> Held<'_> {
    match plan {
        Plan::Free => Held::default(),
        Plan::Unlimited => Held {
            unlimited: true,
            ..Held::default()
        },
        Plan::Limited(limited) => {
            let limit = &limited.matched.limit;
            Held {
                unlimited: false,
                limited: true,
                quota_mode: limit.quota_mode,
                metadata: limited.matched.metadata.as_deref(),
                policy_name: Some(if limit.name.is_empty() {
                    &limited.matched.stats_key
                } else {
                    &limit.name
                }),
            }
        }
    }
}
