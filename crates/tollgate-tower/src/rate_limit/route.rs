//! One route's decision for a request: which budget and key apply, the engine's
//! answer, and what the response must carry.

use std::sync::Arc;

use bytes::Bytes;
use http::Response;
use http_body_util::Full;

use super::Buckets;
use crate::headers::RateLimitHeaders;
use crate::key::{self, KeySelector, MissingKey, RequestParts};
use crate::limits::Shared;
use crate::metrics::record_denial;
use crate::problem::Problem;

/// A route's limits.
#[derive(Clone, Debug)]
pub(crate) struct Route {
    pub(crate) name: Arc<str>,
    pub(crate) shared: Arc<Shared>,
    /// The route's own budget, which overrides the host defaults.
    pub(crate) own: Option<Arc<Buckets>>,
    /// The key of the route's own budget.
    pub(crate) selector: KeySelector,
    /// The host's per-tenant default, for this route.
    pub(crate) host_tenant: Option<Arc<Buckets>>,
    /// The host's per-IP default, for this route.
    pub(crate) host_ip: Option<Arc<Buckets>>,
}

/// What to do with a request.
#[derive(Debug)]
pub(crate) enum Check {
    /// No budget applies: call the service, add nothing, keep no state.
    PassThrough,
    /// Within budget: call the service and add these headers to its response.
    Allowed(RateLimitHeaders),
    /// Answer with this response without calling the service.
    Denied(Response<Full<Bytes>>),
}

impl Route {
    pub(crate) fn check(&self, request: &RequestParts<'_>) -> Check {
        let (buckets, selector) = match (&self.own, &self.host_tenant, &self.host_ip) {
            (Some(own), _, _) => (own, &self.selector),
            (None, Some(tenant), _) if key::tenant(request.extensions).is_some() => {
                (tenant, &KeySelector::Tenant)
            }
            (None, _, Some(ip)) => (ip, &KeySelector::Ip),
            (None, _, None) => return Check::PassThrough,
        };
        let key = match selector.key(request, &self.shared.client_ip) {
            Ok(key) => key,
            Err(MissingKey::Identity(kind)) => {
                return Check::Denied(Problem::unauthorized(format!(
                    "{} is rate limited per {kind}, and the request carries no {kind}",
                    self.name,
                    kind = kind.as_str()
                )));
            }
            Err(MissingKey::PeerAddress) => {
                return Check::Denied(Problem::internal(format!(
                    "{} is rate limited per client IP, and the server does not record peer \
                     addresses (serve with ConnectInfo, or insert PeerAddr)",
                    self.name
                )));
            }
        };
        let decision = buckets.take(&key.text, self.shared.clock.now_nanos());
        let headers = buckets.headers.headers(&decision);
        if decision.is_allowed() {
            return Check::Allowed(headers);
        }
        record_denial(&self.name, key.kind.as_str());
        let mut response = Problem::too_many_requests(&self.name, decision.retry_after_seconds());
        headers.apply(response.headers_mut());
        Check::Denied(response)
    }
}
