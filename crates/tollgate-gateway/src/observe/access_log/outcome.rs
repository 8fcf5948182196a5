//! What a request's handler learnt of it, for its access-log line: its
//! route, tier, key, client, decision and the limit that bound it.

use std::sync::Arc;

/// How a request's limits admitted it: the line's `decision`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Admission {
    /// No limit was decided: no route matched, no usable API key, a CORS
    /// preflight passed, a request the gateway could not read.
    #[default]
    None,
    /// Every limit allowed it.
    Allowed,
    /// An enforced limit refused it.
    Refused,
    /// Only limits in shadow mode refused it, and it was let through.
    Shadow,
    /// Its concurrency limit (`max_in_flight`) refused it.
    InFlightRefused,
    /// Its limits admitted it to wait for its turn (a route's `delay`):
    /// it waited, then was forwarded.
    Delayed,
    /// Its key is exempt.
    Exempt,
    /// The store could not decide; the failure policy answered.
    Unavailable,
}

impl Admission {
    /// The `decision` field.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Admission::None => "none",
            Admission::Allowed => "allowed",
            Admission::Refused => "refused",
            Admission::Shadow => "shadow_refused",
            Admission::InFlightRefused => "in_flight_refused",
            Admission::Delayed => "delayed",
            Admission::Exempt => "exempt",
            Admission::Unavailable => "unavailable",
        }
    }

    /// Whether a plan was decided (then a tier is logged).
    pub(super) fn decided(self) -> bool {
        matches!(
            self,
            Admission::Allowed | Admission::Refused | Admission::Shadow | Admission::Delayed
        )
    }
}

/// What the handler learnt of a request, for its line. The names (route,
/// tier) are kept only when the access log is on: a clone of a name shared
/// by every worker writes to its count, a cache line the workers would
/// otherwise pass between them for nothing.
#[derive(Default)]
pub(crate) struct Outcome {
    /// Whether the line will be written (the names are kept).
    logged: bool,
    /// The route that matched (the demo route without routes).
    pub(super) route: Option<Arc<str>>,
    /// How its limits admitted it.
    pub(crate) admission: Admission,
    /// The tier of its plan; `None` for the default policy.
    pub(super) tier: Option<Arc<str>>,
    /// Whether it was sent to an upstream.
    pub(crate) forwarded: bool,
    /// How long it waited for its turn (a route's `delay`); zero when it
    /// did not.
    pub(crate) waited: std::time::Duration,
    /// The API key it was limited by, for its fingerprint (the writer
    /// fingerprints it; the key itself is never written).
    key: Option<Box<str>>,
    /// The client's address as per-IP budgets count it (after the
    /// trusted-proxy rules).
    client: Option<Box<str>>,
    /// The limit that bound it ([`Decision::binding`](tollgate_core::Decision::binding)),
    /// named as its `RateLimit` field names it, and what it had left
    /// (`None`: unlimited).
    bound: Option<(Box<str>, Option<u64>)>,
}

impl std::fmt::Debug for Outcome {
    /// Never shows the API key.
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Outcome")
            .field("route", &self.route)
            .field("admission", &self.admission)
            .field("tier", &self.tier)
            .field("key", &self.key.as_ref().map(|_| "(a key)"))
            .field("forwarded", &self.forwarded)
            .finish_non_exhaustive()
    }
}

impl Outcome {
    /// The outcome of a request whose line is written if `logged`.
    pub(crate) fn new(logged: bool) -> Self {
        Outcome {
            logged,
            ..Outcome::default()
        }
    }

    /// Notes the route `name` (kept only when the line is written).
    pub(crate) fn set_route(&mut self, name: &Arc<str>) {
        if self.logged {
            self.route = Some(Arc::clone(name));
        }
    }

    /// Notes the API key (kept only when the line is written).
    pub(crate) fn set_key(&mut self, key: &str) {
        if self.logged {
            self.key = Some(key.into());
        }
    }

    /// Notes the client's address, `client()` called only when the line is
    /// written.
    pub(crate) fn set_client(&mut self, client: impl FnOnce() -> String) {
        if self.logged {
            self.client = Some(client().into());
        }
    }

    /// Notes the limit that bound the request, `bound()` called only when
    /// the line is written.
    pub(crate) fn set_bound<'a>(&mut self, bound: impl FnOnce() -> Option<(&'a str, Option<u64>)>) {
        if self.logged {
            self.bound = bound().map(|(policy, remaining)| (policy.into(), remaining));
        }
    }

    /// The API key, the client and the binding limit noted.
    pub(super) fn noted(&self) -> Noted<'_> {
        Noted {
            key: self.key.as_deref(),
            client: self.client.as_deref(),
            bound: self
                .bound
                .as_ref()
                .map(|(policy, remaining)| (&**policy, *remaining)),
        }
    }

    /// Notes the plan's `tier` (kept only when the line is written).
    pub(crate) fn set_tier(&mut self, tier: Option<&Arc<str>>) {
        if self.logged {
            self.tier = tier.cloned();
        }
    }
}

/// What [`Outcome::noted`] gives: the API key (to fingerprint), the client,
/// and the binding limit's name and what it had left.
pub(super) struct Noted<'a> {
    pub(super) key: Option<&'a str>,
    pub(super) client: Option<&'a str>,
    pub(super) bound: Option<(&'a str, Option<u64>)>,
}
