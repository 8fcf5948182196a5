//! Which key a request is limited by: the identity types an authentication layer
//! inserts, the per-route [`KeySelector`], and the namespaced key it yields.

mod client_ip;

use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;

use http::{Extensions, HeaderMap, Method, Uri};

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

/// What a route's buckets are keyed by.
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

/// The kind of a key: the `key_kind` label of the denial counter, and the
/// namespace that keeps a tenant's bucket apart from an IP's with the same text.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KeyKind {
    /// A [`Tenant`].
    Tenant,
    /// A [`Principal`].
    Principal,
    /// A client IP or IPv6 prefix.
    Ip,
    /// A custom key.
    Custom,
}

impl KeyKind {
    /// `tenant`, `principal`, `ip` or `custom`.
    pub fn as_str(self) -> &'static str {
        match self {
            KeyKind::Tenant => "tenant",
            KeyKind::Principal => "principal",
            KeyKind::Ip => "ip",
            KeyKind::Custom => "custom",
        }
    }
}

/// A request's limiter key: its kind and its namespaced text, such as
/// `tenant:acme` or `ip:192.0.2.7`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LimitKey {
    pub(crate) kind: KeyKind,
    pub(crate) text: String,
}

impl LimitKey {
    fn new(kind: KeyKind, value: &str) -> Self {
        let mut text = LimitKey::prefix(kind, value.len());
        text.push_str(value);
        LimitKey { kind, text }
    }

    /// `kind:` in a string with room for `value_length` more bytes.
    fn prefix(kind: KeyKind, value_length: usize) -> String {
        let mut text = String::with_capacity(kind.as_str().len() + 1 + value_length);
        text.push_str(kind.as_str());
        text.push(':');
        text
    }
}

/// Why no key could be found for a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MissingKey {
    /// The declared identity (tenant, principal, custom) is absent: a 401.
    Identity(KeyKind),
    /// The connection's peer address is unknown: the server is not set up to
    /// record it (a 500).
    PeerAddress,
}

impl KeySelector {
    /// The key of a request, by this selector.
    pub(crate) fn key(
        &self,
        request: &RequestParts<'_>,
        client_ip: &ClientIpResolver,
    ) -> Result<LimitKey, MissingKey> {
        let identity = |kind: KeyKind, value: Option<&str>| match value {
            Some(value) if !value.is_empty() => Ok(LimitKey::new(kind, value)),
            _ => Err(MissingKey::Identity(kind)),
        };
        let ip = || {
            let mut text = LimitKey::prefix(KeyKind::Ip, 39);
            if !client_ip.write_client_key(request, &mut text) {
                return Err(MissingKey::PeerAddress);
            }
            Ok(LimitKey {
                kind: KeyKind::Ip,
                text,
            })
        };
        match self {
            KeySelector::PrincipalOrIp => match principal(request.extensions) {
                Some(principal) => identity(KeyKind::Principal, Some(principal)),
                None => ip(),
            },
            KeySelector::Tenant => identity(KeyKind::Tenant, tenant(request.extensions)),
            KeySelector::Principal => identity(KeyKind::Principal, principal(request.extensions)),
            KeySelector::Ip => ip(),
            KeySelector::Custom(key) => identity(KeyKind::Custom, key(request).as_deref()),
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

fn principal(extensions: &Extensions) -> Option<&str> {
    extensions
        .get::<Principal>()
        .map(|principal| principal.0.as_str())
        .filter(|principal| !principal.is_empty())
}
