//! The limits one request can be held to at once: its plan, and policies given
//! with the request (a route's budget), decided together, all or nothing.

use std::hash::BuildHasher;
use std::sync::Arc;

use super::policy_set::VersionedRule;
use crate::decision::Decision;
use crate::policy::{Policy, PolicyError};
use crate::resolution::Resolution;

/// A policy compiled for one limiter's clock, to pass with requests in
/// [`Limit::Policy`]. Made by [`Limiter::prepare`](crate::Limiter::prepare).
///
/// Its version is a fingerprint of the policy, so a key keeps its state while the
/// policy stays the same (across reloads too) and starts afresh when it changes;
/// a window counting refused units keeps its count when only its limit changes.
#[derive(Clone, Copy, Debug)]
pub struct PreparedPolicy {
    pub(crate) rule: VersionedRule,
}

impl PreparedPolicy {
    /// `policy` compiled for a clock of `resolution`.
    ///
    /// # Errors
    ///
    /// [`PolicyError::WindowTooLong`] when the window does not fit the resolution.
    pub fn compile(policy: Policy, resolution: Resolution) -> Result<Self, PolicyError> {
        crate::algorithm::Rule::compile(policy, resolution).map(PreparedPolicy::new)
    }

    pub(crate) fn new(rule: crate::algorithm::Rule) -> Self {
        PreparedPolicy {
            rule: VersionedRule {
                rule,
                version: fingerprint(&rule.policy),
            },
        }
    }

    /// The policy.
    pub fn policy(&self) -> Policy {
        self.rule.rule.policy
    }

    /// A fingerprint of the policy: equal policies, equal versions.
    pub fn version(&self) -> u64 {
        self.rule.version
    }

    /// The window in ticks of the resolution it was compiled for.
    pub fn window_ticks(&self) -> u64 {
        self.rule.rule.window
    }
}

/// Versions of prepared policies have the top bit set; versions of the
/// limiter's own rules count up from 0, so the two never meet.
///
/// A window counting refused units keeps its counter whatever its limit (the
/// count means the same under any limit, and envoyproxy/ratelimit's counter
/// key names none), so its fingerprint leaves the limit out.
fn fingerprint(policy: &Policy) -> u64 {
    let hasher = foldhash::fast::FixedState::with_seed(0x746f_6c6c_6761_7465);
    let fingerprint = if policy.counts_refused() {
        hasher.hash_one(("counting fixed window", policy.window_s()))
    } else {
        hasher.hash_one(policy)
    };
    fingerprint | (1 << 63)
}

/// One limit of a request, for [`Limiter::acquire`](crate::Limiter::acquire).
#[derive(Clone, Copy, Debug)]
pub enum Limit<'a> {
    /// The API key's plan: its tier's policy or the default; none when exempt.
    Plan(&'a str),
    /// `key` limited by `policy`, given with the request. Such keys live apart
    /// from API keys: the same text in both is two keys.
    Policy {
        /// The key, namespaced by the caller (such as `orders/ip:192.0.2.7`).
        key: &'a str,
        /// Its policy.
        policy: &'a PreparedPolicy,
    },
}

impl<'a> Limit<'a> {
    pub(crate) fn key(&self) -> &'a str {
        match self {
            Limit::Plan(key) | Limit::Policy { key, .. } => key,
        }
    }

    pub(crate) fn policy(&self) -> Option<&'a VersionedRule> {
        match self {
            Limit::Plan(_) => None,
            Limit::Policy { policy, .. } => Some(&policy.rule),
        }
    }
}

/// One limit of a request and the units the request costs it, for
/// [`Limiter::acquire_units`](crate::Limiter::acquire_units) and
/// [`Store::acquire_units`](crate::Store::acquire_units): an Envoy
/// descriptor's `hits_addend`, say. Also the units a refund gives back
/// ([`Limiter::give_back_units`](crate::Limiter::give_back_units)).
#[derive(Clone, Copy, Debug)]
pub struct LimitUnits<'a> {
    /// The limit.
    pub limit: Limit<'a>,
    /// The units taken from it: 0 only looks at it (nothing is taken and it
    /// refuses nothing); any value up to `u64::MAX`.
    pub units: u64,
}

/// A limit and its units, as the all-or-nothing decision reads them: a
/// [`Limit`] costs one unit, a [`LimitUnits`] its own.
pub(crate) trait Demand {
    fn limit(&self) -> Limit<'_>;
    fn units(&self) -> u64;
}

impl Demand for Limit<'_> {
    fn limit(&self) -> Limit<'_> {
        *self
    }

    fn units(&self) -> u64 {
        1
    }
}

impl Demand for LimitUnits<'_> {
    fn limit(&self) -> Limit<'_> {
        self.limit
    }

    fn units(&self) -> u64 {
        self.units
    }
}

/// What one limit of [`Limiter::acquire`](crate::Limiter::acquire) decided,
/// and under which policy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LimitDecision {
    /// The decision.
    pub decision: Decision,
    /// The policy that decided; `None` for an exempt key's plan.
    pub policy: Option<Policy>,
    /// For a plan, the key's tier; `None` for the default policy, an exempt
    /// key or a [`Limit::Policy`].
    pub tier: Option<Arc<str>>,
    /// For a plan written as a list, the name of its first policy, which
    /// `decision` and `policy` are of; `None` otherwise.
    pub name: Option<Arc<str>>,
    /// For a plan written as a list, the decisions of its policies after
    /// the first, in order; empty otherwise. The request was allowed only if
    /// `decision` and every one of these allow it (all or nothing).
    pub further: Vec<PolicyDecision>,
}

impl LimitDecision {
    /// Whether this limit allowed the request: its first policy and every
    /// further one.
    pub fn is_allowed(&self) -> bool {
        self.decision.is_allowed()
            && self
                .further
                .iter()
                .all(|further| further.decision.is_allowed())
    }

    /// The longest `Retry-After` of this limit's policies, in whole seconds
    /// rounded up: 0 when none refused with a wait.
    pub fn retry_after_seconds(&self) -> u64 {
        self.further
            .iter()
            .map(|further| further.decision.retry_after_seconds())
            .fold(self.decision.retry_after_seconds(), u64::max)
    }
}

/// What one further policy of a plan decided ([`LimitDecision::further`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PolicyDecision {
    /// The policy's name in its plan.
    pub name: Arc<str>,
    /// The policy.
    pub policy: Policy,
    /// Its decision, as a limit of [`Limiter::acquire`](crate::Limiter::acquire)
    /// reports one.
    pub decision: Decision,
}

/// What one further policy of a plan has, read without using it
/// ([`Limiter::inspect_further`](crate::Limiter::inspect_further)).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PolicyReport {
    /// The policy's name in its plan.
    pub name: String,
    /// The policy.
    pub policy: Policy,
    /// Its budget now; `None` when it holds no state (all of it is there).
    pub state: Option<Decision>,
}
