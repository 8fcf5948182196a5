//! `[[routes]]`: path prefixes, their upstreams (one, or several used in
//! turn) and their own budgets, and what a route's budget is keyed by
//! (`key`).

use std::time::Duration;

use http::Uri;
use serde::Deserialize;
use tollgate_core::{ApiKeyRequirement, MAX_COST};
use tollgate_tower::{Budget, BudgetFields};

use super::ChargeConfig;
use super::ServeConfigError;
use super::format::{duration, optional_uri, uris};

/// One route: a path prefix, its upstream and, optionally, its own budget.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteConfig {
    /// The route's name in metrics and headers. Default: the prefix.
    #[serde(default)]
    pub name: Option<String>,
    /// The path prefix, matched on segment boundaries: `/api` matches `/api`
    /// and `/api/orders`, not `/apis`. The longest matching prefix wins.
    pub prefix: String,
    /// The upstream base URL, `http://host:port[/path]` or
    /// `https://host:port[/path]` (checked as `[upstream_tls]` says), for a
    /// route with one server; a route sets this or `upstreams`.
    #[serde(default, deserialize_with = "optional_uri")]
    pub upstream: Option<Uri>,
    /// The base URLs of a route with several servers, used in turn (round
    /// robin): 1 to [`MAX_UPSTREAMS`], all with the same path.
    #[serde(default, deserialize_with = "uris")]
    pub upstreams: Vec<Uri>,
    /// Remove the prefix from the path before forwarding. Default false.
    #[serde(default)]
    pub strip_prefix: bool,
    /// The route's own budget: requests per minute per key.
    #[serde(default)]
    pub rpm: Option<u64>,
    /// The route's own burst (default: `rpm`).
    #[serde(default)]
    pub burst: Option<u64>,
    /// The route's own calendar quota instead of a rate: requests per key
    /// per `window` (core's `Policy::calendar`). Set with `window`, not
    /// with `rpm`.
    #[serde(default)]
    pub limit: Option<u64>,
    /// The calendar quota's period: `"day"`, `"week"`, `"month"` or
    /// `"year"`, from local midnight in `time_zone`.
    #[serde(default)]
    pub window: Option<tollgate_core::CalendarPeriod>,
    /// The calendar quota's IANA time zone (`"Europe/Berlin"`). Default
    /// `"UTC"`.
    #[serde(default)]
    pub time_zone: Option<String>,
    /// The first day of a weekly quota's week. Default `"monday"` (ISO 8601).
    #[serde(default)]
    pub week_starts: Option<String>,
    /// What the route's own budget is keyed by. Default `principal`, and
    /// `ip` on a route with `api_key = "none"`.
    #[serde(default)]
    pub key: Option<RouteKey>,
    /// What a CORS preflight (an `OPTIONS` request with
    /// `Access-Control-Request-Method`, which browsers send without
    /// credentials) gets. Default [`Preflight::Limit`].
    #[serde(default)]
    pub preflight: Preflight,
    /// The status of a refusal by this route's budget (400 to 599); default
    /// `[refusal] status`, else 429.
    #[serde(default)]
    pub refused_status: Option<u16>,
    /// Shadow mode for this route's own budget: a request over it is counted
    /// (`tollgate_shadow_denials_total`) and let through. Default false.
    #[serde(default)]
    pub shadow: bool,
    /// Whether a request needs an API key: `"required"` (the default),
    /// `"optional"` (a keyless request is held to the route's keyless
    /// budget alone) or `"none"` (keys are not read).
    #[serde(default)]
    pub api_key: ApiKeyRequirement,
    /// The units each request uses of every limit that applies to it (its
    /// plan and the route's budget): 1 to 2^32, default 1.
    #[serde(default = "one")]
    pub cost: u64,
    /// The most requests of one key in flight at once on this route (1 to
    /// 2^32): a request holds a slot from its admission until its response
    /// ends. Default: no limit.
    #[serde(default)]
    pub max_in_flight: Option<u64>,
    /// What `max_in_flight` counts per: `"api_key"` (the default), `"ip"`,
    /// `"tenant"` or `"header:NAME"`.
    #[serde(default)]
    pub in_flight_key: Option<InFlightKey>,
    /// How long a request that its limits would refuse may wait for its
    /// turn instead (`"500ms"`, `"2s"`; at most [`MAX_DELAY`]): it is
    /// charged now for the time its units become available, waits until
    /// then, and is forwarded (nginx's `limit_req ... burst=N delay=M`).
    /// A request whose turn is further away is refused at once, with the
    /// `Retry-After` after which it could wait. Default `"0s"`: refuse.
    #[serde(default, deserialize_with = "duration")]
    pub delay: Duration,
    /// Charge each request the units its response reports, when it ends:
    /// `{ header = "x-usage", max = N }` (see [`ChargeConfig`]). Default:
    /// every request uses `cost`.
    #[serde(default)]
    pub charge: Option<ChargeConfig>,
    /// The most requests of one key waiting at once under `delay`, or
    /// under their tier's (`[limits.tier_defaults.NAME] delay`) on a route
    /// without one (1 to 2^32); more are decided without waiting. Default
    /// 100.
    #[serde(default)]
    pub max_waiting: Option<u64>,
}

/// The longest `delay` a route takes: one hour, as a tier's (core's
/// [`MAX_DELAY`](tollgate_core::MAX_DELAY)). A client kept waiting longer
/// is better told when to come back.
pub(crate) const MAX_DELAY: Duration = tollgate_core::MAX_DELAY;

/// A route's `max_waiting` when `delay` is set and it is not.
pub(crate) const DEFAULT_MAX_WAITING: u64 = 100;

/// What a route's `max_in_flight` counts per: in TOML `"api_key"`, `"ip"`,
/// `"tenant"` or `"header:NAME"` (the same header rules as `key`).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub struct InFlightKey(pub RouteKey);

impl TryFrom<String> for InFlightKey {
    type Error = String;

    fn try_from(text: String) -> Result<Self, String> {
        match text.as_str() {
            "api_key" => Ok(InFlightKey(RouteKey::Principal)),
            "principal" => Err(
                "in_flight_key must be \"api_key\", \"ip\", \"tenant\" or \"header:NAME\"".into(),
            ),
            _ => RouteKey::try_from(text).map(InFlightKey).map_err(|error| {
                error.replace(
                    "key must be \"principal\",",
                    "in_flight_key must be \"api_key\",",
                )
            }),
        }
    }
}

fn one() -> u64 {
    1
}

/// The most servers a route may list in `upstreams`.
pub const MAX_UPSTREAMS: usize = 64;

/// What a route does with CORS preflight requests: in TOML `"limit"` or
/// `"pass"`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Preflight {
    /// Held to the plan like any request: without an API key it gets 401
    /// (the default).
    #[default]
    Limit,
    /// Forwarded without an API key and without using any budget, for the
    /// upstream to answer (the Fetch standard's CORS preflight carries no
    /// credentials).
    Pass,
}

/// What a route's own budget is keyed by: in TOML `"principal"`, `"tenant"`,
/// `"ip"` or `"header:NAME"`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub enum RouteKey {
    /// The API key (the default).
    Principal,
    /// The key's tenant, from `[tenants]`; keys without one are refused (401).
    Tenant,
    /// The client IP.
    Ip,
    /// The value of a request header, such as a client or account id set by
    /// an authentication proxy in front; a request without it, with it twice,
    /// or with a value that is not 1 to 256 bytes of visible ASCII without
    /// spaces is refused (401). Names that cannot work (`Authorization`,
    /// `X-API-Key`, `Host`, `Content-Length`, hop-by-hop ones) are refused.
    Header(http::HeaderName),
}

/// Why header `name` cannot key a route budget, if it cannot.
fn unusable_key_header(name: &http::HeaderName) -> Option<&'static str> {
    match name.as_str() {
        "authorization" | "x-api-key" => Some("the API key is key = \"principal\""),
        "host" => Some("HTTP/2 requests carry no Host header, and HTTP/1 clients choose it"),
        "content-length" | "transfer-encoding" => Some("it describes the body, not the client"),
        name if crate::proxy::hop_by_hop::is_hop_by_hop(name) => {
            Some("it describes the connection, not the client")
        }
        _ => None,
    }
}

impl TryFrom<String> for RouteKey {
    type Error = String;

    fn try_from(text: String) -> Result<Self, String> {
        match text.as_str() {
            "principal" => Ok(RouteKey::Principal),
            "tenant" => Ok(RouteKey::Tenant),
            "ip" => Ok(RouteKey::Ip),
            _ => match text.strip_prefix("header:") {
                Some(name) => {
                    let name =
                        http::HeaderName::from_bytes(name.trim().as_bytes()).map_err(|_| {
                            "key = \"header:NAME\" needs a valid header name".to_owned()
                        })?;
                    if let Some(reason) = unusable_key_header(&name) {
                        return Err(format!("key = \"header:{name}\" cannot work: {reason}"));
                    }
                    Ok(RouteKey::Header(name))
                }
                None => Err(
                    "key must be \"principal\", \"tenant\", \"ip\" or \"header:NAME\"".to_owned(),
                ),
            },
        }
    }
}

impl RouteConfig {
    /// The route's name: `name`, or the prefix.
    pub fn name(&self) -> &str {
        self.name.as_deref().unwrap_or(&self.prefix)
    }

    /// How errors name the route: `NAME (PREFIX)` when it has a name, else
    /// its prefix (a configuration has one route per prefix, and its reader
    /// knows it by either).
    pub fn label(&self) -> String {
        match self.name.as_deref().filter(|name| !name.trim().is_empty()) {
            Some(name) => format!("{name} ({})", self.prefix),
            None => self.prefix.clone(),
        }
    }

    /// The route's upstream URLs: `upstream` alone, or `upstreams` (empty
    /// in a configuration not yet validated that sets neither).
    pub fn upstream_urls(&self) -> &[Uri] {
        match &self.upstream {
            Some(one) => std::slice::from_ref(one),
            None => &self.upstreams,
        }
    }

    /// Whether any of the route's servers is an `https://` one.
    pub fn has_https_upstream(&self) -> bool {
        self.upstream_urls()
            .iter()
            .any(|url| url.scheme_str() == Some("https"))
    }

    /// What the route's own budget is keyed by: `key`, else the client IP
    /// on a route that reads no keys (`api_key = "none"`), else the API key.
    pub fn route_key(&self) -> RouteKey {
        match (&self.key, self.api_key) {
            (Some(key), _) => key.clone(),
            (None, ApiKeyRequirement::None) => RouteKey::Ip,
            (None, _) => RouteKey::Principal,
        }
    }

    /// How its requests may wait instead of being refused: `None` without
    /// a `delay`.
    pub(crate) fn waiting(&self) -> Option<crate::request::delay::Delay> {
        (!self.delay.is_zero()).then(|| crate::request::delay::Delay {
            max_wait: self.delay,
            max_waiting: self.max_waiting.unwrap_or(DEFAULT_MAX_WAITING),
        })
    }

    /// Without a `delay` and out of shadow mode: the most requests of one
    /// key that may wait at once for their tier's delay (`max_waiting`).
    pub(crate) fn tier_waiting(&self) -> Option<u64> {
        // A route charged by usage never waits (see `validate`).
        (self.delay.is_zero() && !self.shadow && self.charge.is_none())
            .then(|| self.max_waiting.unwrap_or(DEFAULT_MAX_WAITING))
    }

    /// What `max_in_flight` counts per: `in_flight_key`, else the API key.
    pub fn in_flight_key(&self) -> RouteKey {
        self.in_flight_key
            .as_ref()
            .map_or(RouteKey::Principal, |key| key.0.clone())
    }

    /// Whether the route declares a budget of its own: a rate (`rpm`) or a
    /// calendar quota (`window`; checked whole by [`RouteConfig::budget`]).
    pub fn has_budget(&self) -> bool {
        self.rpm.is_some() || self.window.is_some() || self.limit.is_some()
    }

    /// The route's own budget, if it declares one.
    ///
    /// # Errors
    ///
    /// [`ServeConfigError::Route`] for `burst` without `rpm`, a calendar
    /// `window` beside `rpm`, an unknown time zone, or a count out of range.
    pub fn budget(&self) -> Result<Option<Budget>, ServeConfigError> {
        BudgetFields {
            rpm: self.rpm,
            burst: self.burst,
            limit: self.limit,
            window: self.window,
            time_zone: self.time_zone.clone(),
            week_starts: self.week_starts.clone(),
        }
        .budget()
        .map_err(|budget| ServeConfigError::Route {
            route: self.label(),
            reason: budget.to_string(),
        })
    }

    fn validate(&self) -> Result<(), ServeConfigError> {
        let error = |reason: &str| ServeConfigError::Route {
            route: self.label(),
            reason: reason.to_owned(),
        };
        if !self.prefix.starts_with('/') {
            return Err(error("the prefix must start with /"));
        }
        if self
            .name
            .as_deref()
            .is_some_and(|name| name.trim().is_empty())
        {
            return Err(error("the name must not be empty"));
        }
        match (&self.upstream, self.upstreams.len()) {
            (Some(_), 1..) => {
                return Err(error(
                    "set upstream (one URL) or upstreams (a list), not both",
                ));
            }
            (None, 0) => {
                return Err(error(
                    "needs upstream (one URL) or upstreams (a list of at least one)",
                ));
            }
            (None, count) if count > MAX_UPSTREAMS => {
                return Err(error(&format!(
                    "upstreams lists {count} URLs; at most {MAX_UPSTREAMS}"
                )));
            }
            _ => {}
        }
        let urls = self.upstream_urls();
        for (index, url) in urls.iter().enumerate() {
            validate_upstream(url).map_err(|reason| match self.upstream {
                Some(_) => error(reason),
                None => error(&format!("upstreams[{index}]: {reason}")),
            })?;
        }
        for (index, url) in urls.iter().enumerate().skip(1) {
            if url.path() != urls[0].path() {
                return Err(error(&format!(
                    "upstreams[{index}] has another path than upstreams[0]: the servers of \
                     a route serve the same paths"
                )));
            }
            if urls[..index]
                .iter()
                .any(|earlier| earlier.authority() == url.authority())
            {
                return Err(error(&format!(
                    "upstreams[{index}] names a server listed before it"
                )));
            }
        }
        if self.key.is_some() && !self.has_budget() {
            return Err(error(
                "key applies to the route's own budget: set rpm too (or a calendar quota: limit and window)",
            ));
        }
        if !(1..=MAX_COST).contains(&self.cost) {
            return Err(error(&format!(
                "cost must be 1 to {MAX_COST} (2^32), the units each request uses"
            )));
        }
        if self.api_key != ApiKeyRequirement::Required
            && self.has_budget()
            && !self.route_key().kind().serves_keyless()
        {
            return Err(error(&format!(
                "api_key = \"{}\" holds a request without a key to the route's budget, \
                 which cannot then be keyed by the API key (principal) or its tenant: key it \
                 by \"ip\" or \"header:NAME\"",
                self.api_key.name()
            )));
        }
        match self.max_in_flight {
            Some(max) if !(1..=tollgate_core::MAX_IN_FLIGHT).contains(&max) => {
                return Err(error(&format!(
                    "max_in_flight must be 1 to {} (2^32), the requests of one key in flight at once",
                    tollgate_core::MAX_IN_FLIGHT
                )));
            }
            None if self.in_flight_key.is_some() => {
                return Err(error("in_flight_key applies to max_in_flight: set it too"));
            }
            _ => {}
        }
        if self.delay > MAX_DELAY {
            return Err(error(&format!(
                "delay must be at most {}, how long a request may wait for its turn",
                humantime::format_duration(MAX_DELAY)
            )));
        }
        match self.max_waiting {
            Some(most) if !(1..=tollgate_core::MAX_IN_FLIGHT).contains(&most) => {
                return Err(error(&format!(
                    "max_waiting must be 1 to {} (2^32), the requests of one key waiting at once",
                    tollgate_core::MAX_IN_FLIGHT
                )));
            }
            _ => {}
        }
        if self.shadow && !self.delay.is_zero() {
            return Err(error(
                "delay makes requests wait for the route's budget, and shadow only observes \
                 it: remove one",
            ));
        }
        if let Some(charge) = &self.charge {
            charge
                .validate(self.cost)
                .map_err(|reason| error(&reason))?;
            if !self.delay.is_zero() {
                return Err(error(
                    "charge settles a request's usage when its response ends, and delay books \
                     turns ahead of now: a refund of unused units would hand a waiting \
                     request's turn to a newcomer, so the two are not combined: remove one",
                ));
            }
        }
        if self.shadow && !self.has_budget() {
            return Err(error(
                "shadow applies to the route's own budget: set rpm too (or a calendar quota: \
                 limit and window)",
            ));
        }
        self.budget().map(|_| ())
    }
}

/// Why `upstream` cannot be a route's upstream URL, if it cannot.
fn validate_upstream(upstream: &Uri) -> Result<(), &'static str> {
    if !matches!(upstream.scheme_str(), Some("http" | "https")) {
        return Err("the upstream must be an http:// or https:// URL");
    }
    match upstream.authority() {
        None => return Err("the upstream needs a host"),
        // Never shown: the URL's credentials would reach the log.
        Some(authority) if authority.as_str().contains('@') => {
            return Err(
                "the upstream URL must not carry credentials (user:password@): tollgate \
                 does not send them, and they would sit in the configuration in clear",
            );
        }
        Some(_) => {}
    }
    if upstream.query().is_some() {
        return Err("the upstream must not have a query");
    }
    Ok(())
}

/// Checks every route, and that no two share a prefix or a name (a route's
/// name keys its budget and its metrics).
pub(super) fn validate(routes: &[RouteConfig]) -> Result<(), ServeConfigError> {
    let mut prefixes = std::collections::HashSet::new();
    let mut names = std::collections::HashSet::new();
    for route in routes {
        route.validate()?;
        if !prefixes.insert(route.prefix.trim_end_matches('/')) {
            return Err(ServeConfigError::Route {
                route: route.label(),
                reason: "another route has the same prefix".into(),
            });
        }
        if !names.insert(route.name()) {
            return Err(ServeConfigError::Route {
                route: route.label(),
                reason: "another route has the same name".into(),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::ServeConfig;
    use super::*;

    #[test]
    fn route_keys_are_read() {
        let key = |text: &str| {
            let toml = format!(
                "[[routes]]\nprefix = \"/api\"\nupstream = \"http://h:1\"\nrpm = 1\nkey = \"{text}\""
            );
            ServeConfig::from_toml_str(&toml).unwrap().routes[0]
                .key
                .clone()
        };
        assert_eq!(key("principal"), Some(RouteKey::Principal));
        assert_eq!(key("tenant"), Some(RouteKey::Tenant));
        assert_eq!(key("ip"), Some(RouteKey::Ip));
        assert_eq!(
            key("header:X-Client-Id"),
            Some(RouteKey::Header(http::HeaderName::from_static(
                "x-client-id"
            )))
        );
    }

    #[test]
    fn errors_name_the_route_by_its_name_and_prefix() {
        let refused = |route: &str| {
            let toml = format!("[[routes]]\nprefix = \"/api\"\nupstream = \"http://h:1\"\n{route}");
            ServeConfig::from_toml_str(&toml).unwrap_err().to_string()
        };
        assert_eq!(
            refused("name = \"orders\"\nburst = 5"),
            "route orders (/api): burst needs rpm"
        );
        assert_eq!(refused("burst = 5"), "route /api: burst needs rpm");
        assert_eq!(
            refused("name = \" \""),
            "route /api: the name must not be empty"
        );
    }

    #[test]
    fn a_route_lists_one_upstream_or_several() {
        let route = |servers: &str| {
            let toml = format!("[[routes]]\nprefix = \"/api\"\n{servers}");
            ServeConfig::from_toml_str(&toml).map(|config| {
                let urls = config.routes[0].upstream_urls();
                urls.iter().map(ToString::to_string).collect::<Vec<_>>()
            })
        };
        assert_eq!(
            route("upstream = \"http://a:1/v1\"").unwrap(),
            ["http://a:1/v1"]
        );
        assert_eq!(
            route("upstreams = [\"http://a:1/v1\", \"http://b:2/v1\"]").unwrap(),
            ["http://a:1/v1", "http://b:2/v1"]
        );
        let refused = |servers: &str| route(servers).unwrap_err().to_string();
        for (servers, reason) in [
            (
                "upstream = \"http://a:1\"\nupstreams = [\"http://b:2\"]",
                "set upstream (one URL) or upstreams (a list), not both",
            ),
            (
                "",
                "needs upstream (one URL) or upstreams (a list of at least one)",
            ),
            (
                "upstreams = []",
                "needs upstream (one URL) or upstreams (a list of at least one)",
            ),
            (
                "upstreams = [\"http://a:1/v1\", \"http://b:2/v2\"]",
                "upstreams[1] has another path than upstreams[0]",
            ),
            (
                "upstreams = [\"http://a:1\", \"http://a:1/\"]",
                "upstreams[1] names a server listed before it",
            ),
            (
                "upstreams = [\"http://a:1\", \"ftp://b:2\"]",
                "upstreams[1]: the upstream must be an http:// or https:// URL",
            ),
        ] {
            let error = refused(servers);
            assert!(error.contains(reason), "{servers}: {error}");
        }
        let many: Vec<String> = (1..=65)
            .map(|port| format!("\"http://a:{port}\""))
            .collect();
        let error = refused(&format!("upstreams = [{}]", many.join(", ")));
        assert!(
            error.contains("upstreams lists 65 URLs; at most 64"),
            "{error}"
        );
    }
}
