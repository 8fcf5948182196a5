//! The route table: path prefixes, their upstream servers and budgets.

use std::sync::Arc;

use http::Uri;
use http::uri::PathAndQuery;
use tollgate_core::{ApiKeyRequirement, PreparedPolicy, Store};
use tollgate_tower::Budget;

use crate::config::{Preflight, RouteConfig, RouteKey, ServeConfigError};
use crate::proxy::servers::Servers;
use crate::proxy::upstream::UpstreamTarget;
use crate::proxy::upstream_tls::UpstreamTls;

/// A budget ready for the store: its `rpm` and `burst`, and the prepared policy.
#[derive(Clone, Debug)]
pub(crate) struct RouteBudget {
    pub(crate) budget: Budget,
    pub(crate) prepared: PreparedPolicy,
}

impl RouteBudget {
    pub(crate) fn new(budget: Budget, store: &dyn Store) -> Result<Self, ServeConfigError> {
        let prepared = store
            .prepare(budget.policy())
            .map_err(|error| ServeConfigError::Invalid(error.to_string()))?;
        Ok(RouteBudget { budget, prepared })
    }
}

/// One route.
#[derive(Debug)]
pub(crate) struct Route {
    pub(crate) name: Arc<str>,
    prefix: String,
    /// Where its requests go: one server or several, in turn.
    pub(crate) servers: Servers,
    /// The upstreams' base path without a trailing `/` (empty for the root).
    upstream_path: String,
    strip_prefix: bool,
    /// The route's own budget and what it is keyed by.
    pub(crate) budget: Option<(RouteBudget, RouteKey)>,
    /// Whether CORS preflights pass without a key or budget.
    pub(crate) preflight_passes: bool,
    /// The status of a refusal by its own budget, when set.
    pub(crate) refused_status: Option<u16>,
    /// Whether its own budget is in shadow mode (counted, never refusing).
    pub(crate) shadow: bool,
    /// Whether its requests need an API key.
    pub(crate) api_key: ApiKeyRequirement,
    /// The units each request uses of every limit that applies to it.
    pub(crate) cost: u64,
    /// Its concurrency limit: the most requests in flight at once, and
    /// what they are counted per.
    pub(crate) in_flight: Option<(u64, RouteKey)>,
    /// How its requests may wait for their turn instead of being refused.
    pub(crate) delay: Option<crate::request::delay::Delay>,
    /// Without a delay of its own: the most requests of one key that may
    /// wait at once for the delay of their tier (`[limits.tier_defaults]`);
    /// `None` for a route with a delay, or in shadow mode (whose budget
    /// only observes, so never makes a request wait).
    pub(crate) tier_waiting: Option<u64>,
    /// How its requests are charged by usage when their responses end.
    pub(crate) charge: Option<crate::config::ChargeConfig>,
}

impl Route {
    /// The route `config` describes; `tls` is the client configuration of
    /// `https://` upstreams (present when the route's upstream is one).
    fn new(
        config: &RouteConfig,
        store: &dyn Store,
        tls: Option<&Arc<rustls::ClientConfig>>,
    ) -> Result<Self, ServeConfigError> {
        let budget = match config.budget()? {
            Some(budget) => Some((RouteBudget::new(budget, store)?, config.route_key())),
            None => None,
        };
        let urls = config.upstream_urls();
        let upstream_path = urls
            .first()
            .map_or("", |url| url.path())
            .trim_end_matches('/')
            .to_owned();
        let route_error = |reason: String| ServeConfigError::Route {
            route: config.label(),
            reason,
        };
        let targets = urls
            .iter()
            .map(|url| {
                let mut origin = url.clone().into_parts();
                origin.path_and_query = Some(PathAndQuery::from_static("/"));
                let origin =
                    Uri::from_parts(origin).map_err(|error| route_error(error.to_string()))?;
                let mut target =
                    UpstreamTarget::new(origin).map_err(|reason| route_error(reason.into()))?;
                if let (Some("https"), Some(tls)) = (url.scheme_str(), tls) {
                    let host = url.host().unwrap_or_default();
                    let secured =
                        UpstreamTls::new(tls, host).map_err(|reason| route_error(reason.into()))?;
                    target = target.with_tls(secured);
                }
                Ok(Arc::new(target))
            })
            .collect::<Result<Vec<_>, ServeConfigError>>()?;
        if targets.is_empty() {
            return Err(route_error("needs upstream or upstreams".into()));
        }
        Ok(Route {
            name: Arc::from(config.name()),
            prefix: config.prefix.trim_end_matches('/').to_owned(),
            servers: Servers::new(targets),
            upstream_path,
            strip_prefix: config.strip_prefix,
            budget,
            preflight_passes: config.preflight == Preflight::Pass,
            refused_status: config.refused_status,
            shadow: config.shadow,
            api_key: config.api_key,
            cost: config.cost,
            in_flight: config
                .max_in_flight
                .map(|max| (max, config.in_flight_key())),
            delay: config.waiting(),
            tier_waiting: config.tier_waiting(),
            charge: config.charge.clone(),
        })
    }

    /// Whether `path` falls under this route's prefix, on a segment boundary.
    fn matches(&self, path: &str) -> bool {
        match path.strip_prefix(&self.prefix) {
            Some(rest) => rest.is_empty() || rest.starts_with('/') || self.prefix.is_empty(),
            None => false,
        }
    }

    /// The upstream path and query for a request to `original`: the
    /// upstream's base path, then the request's path (without the prefix when
    /// `strip_prefix`), then its query.
    pub(crate) fn upstream_path_and_query(
        &self,
        original: &Uri,
    ) -> Result<PathAndQuery, http::uri::InvalidUri> {
        let path = original.path();
        let path = if self.strip_prefix {
            path.strip_prefix(&self.prefix).unwrap_or(path)
        } else {
            path
        };
        let mut target = String::with_capacity(self.upstream_path.len() + path.len() + 16);
        target.push_str(&self.upstream_path);
        if !path.starts_with('/') {
            target.push('/');
        }
        target.push_str(path);
        if let Some(query) = original.query() {
            target.push('?');
            target.push_str(query);
        }
        target.parse()
    }
}

/// The routes, longest prefix first.
#[derive(Debug, Default)]
pub(crate) struct RouteTable {
    routes: Vec<Route>,
}

impl RouteTable {
    /// The routes of `configs`, their budgets prepared for `store`, their
    /// `https://` upstreams reached with `tls`.
    pub(crate) fn new(
        configs: &[RouteConfig],
        store: &dyn Store,
        tls: Option<&Arc<rustls::ClientConfig>>,
    ) -> Result<Self, ServeConfigError> {
        let mut routes = configs
            .iter()
            .map(|config| Route::new(config, store, tls))
            .collect::<Result<Vec<_>, _>>()?;
        routes.sort_by_key(|route| std::cmp::Reverse(route.prefix.len()));
        Ok(RouteTable { routes })
    }

    /// The routes' names.
    pub(crate) fn names(&self) -> impl Iterator<Item = &Arc<str>> {
        self.routes.iter().map(|route| &route.name)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.routes.is_empty()
    }

    /// The route named `name` (names are unique).
    pub(crate) fn by_name(&self, name: &str) -> Option<&Route> {
        self.routes.iter().find(|route| &*route.name == name)
    }

    /// The route of `path`: the longest matching prefix.
    pub(crate) fn find(&self, path: &str) -> Option<&Route> {
        self.routes.iter().find(|route| route.matches(path))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tollgate_core::{LimiterConfig, ManualClock, MemoryStore};

    fn table(routes: &str) -> RouteTable {
        let config = crate::config::ServeConfig::from_toml_str(routes).unwrap();
        let store =
            MemoryStore::new(&LimiterConfig::default(), Arc::new(ManualClock::new(0))).unwrap();
        RouteTable::new(&config.routes, &store, None).unwrap()
    }

    #[test]
    fn the_longest_prefix_on_a_segment_boundary_wins() {
        let table = table(
            "[[routes]]\nprefix = \"/\"\nupstream = \"http://a:1\"\n\
             [[routes]]\nprefix = \"/api\"\nupstream = \"http://b:2/v1/\"\nstrip_prefix = true\n\
             [[routes]]\nprefix = \"/api/admin/\"\nupstream = \"http://c:3\"",
        );
        let target = |path: &str| {
            let route = table.find(path).unwrap();
            let path_and_query = route
                .upstream_path_and_query(&path.parse().unwrap())
                .unwrap();
            let host = &route.servers.first().unwrap().host;
            format!("{}{path_and_query}", host.to_str().unwrap())
        };
        assert_eq!(target("/api/orders?x=1"), "b:2/v1/orders?x=1");
        assert_eq!(target("/api"), "b:2/v1/");
        assert_eq!(target("/apis"), "a:1/apis");
        assert_eq!(target("/api/admin/users"), "c:3/api/admin/users");
        assert_eq!(target("/"), "a:1/");
    }

    #[test]
    fn without_a_catch_all_unknown_paths_have_no_route() {
        let table = table("[[routes]]\nprefix = \"/api\"\nupstream = \"http://b:2\"");
        assert!(table.find("/other").is_none());
        assert!(table.find("/api/x").is_some());
    }
}
