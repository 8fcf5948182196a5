//! Which key a request is limited by: the identity types an authentication layer
//! inserts, the per-route [`KeySelector`], and the namespaced key it yields.

mod client_ip;

use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;

use http::{Extensions, HeaderMap, Method, Uri};
use tollgate_core::{RouteKeyKind, route_store_key, route_store_key_prefix};

pub use client_ip::{ClientIpResolver, ForwardedHeader};

/// The tenant a request belongs to, inserted into the request's extensions by an
/// authentication layer in front of the rate limiter. An empty tenant counts as
/// none.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Tenant(pub String);

/// The authenticated principal (user, service account, API key id) making the
/// request, inserted into the request's extensions by an authentication layer.
/// An empty principal counts as none.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Principal(pub String);

/// The TCP peer of the connection, for servers other than axum: insert it into
/// each request's extensions. With the `axum` feature, axum's
/// `ConnectInfo<SocketAddr>` is read as well.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PeerAddr(pub SocketAddr);

/// The parts of a request a [`KeySelector::custom`] function may read.
#[derive(Clone, Copy, Debug)]
pub struct RequestParts<'a> {
    /// The method.
    pub method: &'a Method,
    /// The URI.
    pub uri: &'a Uri,
    /// The headers.
    pub headers: &'a HeaderMap,
    /// The extensions (identity types, connection info).
    pub extensions: &'a Extensions,
}

type CustomKey = Arc<dyn Fn(&RequestParts<'_>) -> Option<String> + Send + Sync>;

/// What a route's own budget is keyed by.
///
/// When a route names no selector, the key is the [`Principal`] if one is
/// resolved, else the client IP. When a declared selector finds nothing (no
/// tenant, no principal, a custom function returning `None` or an empty string),
/// the request is answered `401 Unauthorized` with a problem+json body saying
/// which identity was missing, and never reaches the service: a key is never
/// empty and never silently replaced by another kind.
#[derive(Clone, Default)]
pub enum KeySelector {
    /// The principal if resolved, else the client IP.
    #[default]
    PrincipalOrIp,
    /// The [`Tenant`] extension.
    Tenant,
    /// The [`Principal`] extension.
    Principal,
    /// The client IP (see [`ClientIpResolver`]).
    Ip,
    /// A function of the request; `None` or `""` means no key.
    Custom(CustomKey),
}

impl KeySelector {
    /// A selector computing the key from the request.
    ///
    /// ```
    /// use tollgate_tower::KeySelector;
    ///
    /// let by_client_id = KeySelector::custom(|request| {
    ///     request.headers.get("x-client-id")?.to_str().ok().map(str::to_owned)
    /// });
    /// ```
    pub fn custom(
        key: impl Fn(&RequestParts<'_>) -> Option<String> + Send + Sync + 'static,
    ) -> Self {
        KeySelector::Custom(Arc::new(key))
    }
}

impl fmt::Debug for KeySelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            KeySelector::PrincipalOrIp => "PrincipalOrIp",
            KeySelector::Tenant => "Tenant",
            KeySelector::Principal => "Principal",
            KeySelector::Ip => "Ip",
            KeySelector::Custom(_) => "Custom",
        })
    }
}

/// A request's store key, `{route}/{kind}:{value}` (such as
/// `orders/tenant:acme` or `search/ip:192.0.2.7`), and its kind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LimitKey {
    pub(crate) kind: RouteKeyKind,
    pub(crate) text: String,
}

impl LimitKey {
    fn new(route: &str, kind: RouteKeyKind, value: &str) -> Self {
        LimitKey {
            kind,
            text: route_store_key(route, kind, value),
        }
    }
}

/// Why no key could be found for a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MissingKey {
    /// The declared identity (tenant, principal, custom) is absent: a 401.
    Identity(RouteKeyKind),
    /// The connection's peer address is unknown: the server is not set up to
    /// record it (a 500).
    PeerAddress,
}

impl KeySelector {
    /// The store key of a request on `route`, by this selector.
    pub(crate) fn key(
        &self,
        request: &RequestParts<'_>,
        client_ip: &ClientIpResolver,
        route: &str,
    ) -> Result<LimitKey, MissingKey> {
        let identity = |kind: RouteKeyKind, value: Option<&str>| match value {
            Some(value) if !value.is_empty() => Ok(LimitKey::new(route, kind, value)),
            _ => Err(MissingKey::Identity(kind)),
        };
        let ip = || {
            // An IPv6 address is at most 39 characters, and its prefix "/128".
            let mut text = route_store_key_prefix(route, RouteKeyKind::Ip, 43);
            if !client_ip.write_client_key(request, &mut text) {
                return Err(MissingKey::PeerAddress);
            }
            Ok(LimitKey {
                kind: RouteKeyKind::Ip,
                text,
            })
        };
        match self {
            KeySelector::PrincipalOrIp => match principal(request.extensions) {
                Some(principal) => identity(RouteKeyKind::Principal, Some(principal)),
                None => ip(),
            },
            KeySelector::Tenant => identity(RouteKeyKind::Tenant, tenant(request.extensions)),
            KeySelector::Principal => {
                identity(RouteKeyKind::Principal, principal(request.extensions))
            }
            KeySelector::Ip => ip(),
            KeySelector::Custom(key) => identity(RouteKeyKind::Custom, key(request).as_deref()),
        }
    }
}

/// The request's tenant, when an authentication layer resolved a non-empty one.
pub(crate) fn tenant(extensions: &Extensions) -> Option<&str> {
    extensions
        .get::<Tenant>()
        .map(|tenant| tenant.0.as_str())
        .filter(|tenant| !tenant.is_empty())
}

pub(crate) fn principal(extensions: &Extensions) -> Option<&str> {
    extensions
        .get::<Principal>()
        .map(|principal| principal.0.as_str())
        .filter(|principal| !principal.is_empty())
}
