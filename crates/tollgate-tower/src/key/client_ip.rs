//! The client IP of a request: the peer address, or, behind trusted proxies, the
//! right-most address in `Forwarded` / `X-Forwarded-For` that is not a trusted
//! proxy; IPv4-mapped IPv6 addresses as IPv4, IPv6 clients grouped by prefix.

use std::fmt::Write as _;
use std::net::{IpAddr, SocketAddr};

use forwarded_header_value::ForwardedHeaderValue;
use http::header::FORWARDED;
use ipnet::{IpNet, Ipv6Net};

use super::{PeerAddr, RequestParts};

/// Finds the client address of a request and turns it into a bucket key.
///
/// - The peer address comes from the [`PeerAddr`] extension or, with the `axum`
///   feature, axum's `ConnectInfo<SocketAddr>`.
/// - Forwarding headers are read only when the peer itself is a trusted proxy:
///   `Forwarded` (RFC 7239) if present, else `X-Forwarded-For`. The chain is
///   walked from the right; the first address that is not a trusted proxy is the
///   client. An entry that is not an IP address (`unknown`, an obfuscated
///   identifier, garbage) stops the walk: the last trusted hop is the client,
///   since nothing beyond it can be believed. With no trusted proxies, the
///   headers are ignored entirely, so a client cannot choose its own key.
/// - An IPv4-mapped IPv6 address (`::ffff:192.0.2.7`) is its IPv4 address.
/// - IPv6 clients are grouped by their network prefix (default /64), since one
///   host usually holds a whole /64.
#[derive(Clone, Debug)]
pub struct ClientIpResolver {
    trusted_proxies: Vec<IpNet>,
    ipv6_prefix: u8,
}

impl Default for ClientIpResolver {
    fn default() -> Self {
        ClientIpResolver {
            trusted_proxies: Vec::new(),
            ipv6_prefix: 64,
        }
    }
}

impl ClientIpResolver {
    /// Trusts `proxies` (CIDR networks) to report the client in forwarding
    /// headers, and groups IPv6 clients by `ipv6_prefix` bits (clamped to 128).
    pub fn new(proxies: impl IntoIterator<Item = IpNet>, ipv6_prefix: u8) -> Self {
        ClientIpResolver {
            trusted_proxies: proxies.into_iter().collect(),
            ipv6_prefix: ipv6_prefix.min(128),
        }
    }

    /// The client's address, or `None` when the peer address is unknown.
    pub fn client_ip(&self, request: &RequestParts<'_>) -> Option<IpAddr> {
        let peer = canonical(peer_ip(request)?);
        if !self.is_trusted(peer) {
            return Some(peer);
        }
        let chain = forwarded_chain(request).unwrap_or_default();
        let mut client = peer;
        for hop in chain.iter().rev() {
            let Some(hop) = hop else {
                return Some(client);
            };
            client = canonical(*hop);
            if !self.is_trusted(client) {
                return Some(client);
            }
        }
        Some(client)
    }

    /// The client's bucket key: the IPv4 address, or the IPv6 network of the
    /// configured prefix (`2001:db8::/64`); `None` when the peer is unknown.
    pub fn client_key(&self, request: &RequestParts<'_>) -> Option<String> {
        let mut key = String::new();
        self.write_client_key(request, &mut key).then_some(key)
    }

    /// Appends the client's bucket key to `out`; `false` when the peer is unknown.
    pub(crate) fn write_client_key(&self, request: &RequestParts<'_>, out: &mut String) -> bool {
        match self.client_ip(request) {
            Some(IpAddr::V4(v4)) => {
                // Dotted quad without the formatting machinery: this is per request.
                let mut digits = itoa::Buffer::new();
                for (index, octet) in v4.octets().into_iter().enumerate() {
                    if index > 0 {
                        out.push('.');
                    }
                    out.push_str(digits.format(octet));
                }
                true
            }
            Some(IpAddr::V6(v6)) => {
                let network = Ipv6Net::new(v6, self.ipv6_prefix).map(|network| network.trunc());
                match network {
                    Ok(network) => write!(out, "{network}"),
                    Err(_) => write!(out, "{v6}"),
                }
                .is_ok()
            }
            None => false,
        }
    }

    fn is_trusted(&self, ip: IpAddr) -> bool {
        self.trusted_proxies
            .iter()
            .any(|network| network.contains(&ip))
    }
}

fn canonical(ip: IpAddr) -> IpAddr {
    ip.to_canonical()
}

fn peer_ip(request: &RequestParts<'_>) -> Option<IpAddr> {
    if let Some(PeerAddr(address)) = request.extensions.get::<PeerAddr>() {
        return Some(address.ip());
    }
    #[cfg(feature = "axum")]
    if let Some(axum::extract::ConnectInfo(address)) = request
        .extensions
        .get::<axum::extract::ConnectInfo<SocketAddr>>()
    {
        return Some(address.ip());
    }
    None
}

/// The forwarding chain, client first: `None` entries are hops that are not IP
/// addresses. Several header lines are joined in order.
fn forwarded_chain(request: &RequestParts<'_>) -> Option<Vec<Option<IpAddr>>> {
    let joined = |name| {
        let values: Vec<&str> = request
            .headers
            .get_all(name)
            .iter()
            .map(|value| value.to_str().ok())
            .collect::<Option<_>>()?;
        (!values.is_empty()).then(|| values.join(","))
    };
    if let Some(forwarded) = joined(FORWARDED.as_str()) {
        let parsed = ForwardedHeaderValue::from_forwarded(&forwarded).ok()?;
        return Some(
            parsed
                .iter()
                .map(|stanza| stanza.forwarded_for_ip())
                .collect(),
        );
    }
    let forwarded_for = joined("x-forwarded-for")?;
    Some(
        forwarded_for
            .split(',')
            .map(|hop| parse_hop(hop.trim()))
            .collect(),
    )
}

/// An `X-Forwarded-For` hop: an address, possibly with a port or in brackets.
fn parse_hop(hop: &str) -> Option<IpAddr> {
    hop.parse::<IpAddr>()
        .ok()
        .or_else(|| hop.parse::<SocketAddr>().ok().map(|address| address.ip()))
        .or_else(|| hop.strip_prefix('[')?.strip_suffix(']')?.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::{Extensions, HeaderMap, HeaderValue, Method, Uri};

    fn client(resolver: &ClientIpResolver, peer: &str, headers: &[(&str, &str)]) -> Option<String> {
        let mut extensions = Extensions::new();
        extensions.insert(PeerAddr(peer.parse().unwrap()));
        let mut map = HeaderMap::new();
        for (name, value) in headers {
            let name = http::HeaderName::from_bytes(name.as_bytes()).unwrap();
            map.append(name, HeaderValue::from_str(value).unwrap());
        }
        let request = RequestParts {
            method: &Method::GET,
            uri: &Uri::from_static("/"),
            headers: &map,
            extensions: &extensions,
        };
        resolver.client_key(&request)
    }

    fn trusting(networks: &[&str]) -> ClientIpResolver {
        ClientIpResolver::new(networks.iter().map(|network| network.parse().unwrap()), 64)
    }

    #[test]
    fn untrusted_peers_are_the_client() {
        let resolver = ClientIpResolver::default();
        let spoofed = [("x-forwarded-for", "203.0.113.9")];
        assert_eq!(
            client(&resolver, "192.0.2.7:1234", &spoofed).as_deref(),
            Some("192.0.2.7")
        );
        let resolver = trusting(&["10.0.0.0/8"]);
        assert_eq!(
            client(&resolver, "192.0.2.7:1234", &spoofed).as_deref(),
            Some("192.0.2.7")
        );
    }

    #[test]
    fn behind_trusted_proxies_the_rightmost_untrusted_hop_is_the_client() {
        let resolver = trusting(&["10.0.0.0/8"]);
        let chain = [("x-forwarded-for", "198.51.100.1, 203.0.113.9, 10.0.0.2")];
        assert_eq!(
            client(&resolver, "10.0.0.1:80", &chain).as_deref(),
            Some("203.0.113.9")
        );
        let split = [
            ("x-forwarded-for", "203.0.113.9"),
            ("x-forwarded-for", "10.0.0.3"),
        ];
        assert_eq!(
            client(&resolver, "10.0.0.1:80", &split).as_deref(),
            Some("203.0.113.9")
        );
        let forwarded = [(
            "forwarded",
            "for=198.51.100.1, for=\"[2001:db8:cafe::17]:4711\";proto=https",
        )];
        assert_eq!(
            client(&resolver, "10.0.0.1:80", &forwarded).as_deref(),
            Some("2001:db8:cafe::/64")
        );
        let all_trusted = [("x-forwarded-for", "10.1.1.1, 10.0.0.2")];
        assert_eq!(
            client(&resolver, "10.0.0.1:80", &all_trusted).as_deref(),
            Some("10.1.1.1")
        );
        let unknown = [("x-forwarded-for", "203.0.113.9, unknown, 10.0.0.2")];
        assert_eq!(
            client(&resolver, "10.0.0.1:80", &unknown).as_deref(),
            Some("10.0.0.2")
        );
        assert_eq!(
            client(&resolver, "10.0.0.1:80", &[]).as_deref(),
            Some("10.0.0.1")
        );
    }

    #[test]
    fn ipv4_mapped_addresses_are_ipv4_and_ipv6_is_grouped() {
        let resolver = ClientIpResolver::default();
        assert_eq!(
            client(&resolver, "[::ffff:192.0.2.7]:1", &[]).as_deref(),
            Some("192.0.2.7")
        );
        assert_eq!(
            client(&resolver, "[2001:db8:1:2:3::4]:1", &[]).as_deref(),
            Some("2001:db8:1:2::/64")
        );
        let exact = ClientIpResolver::new([], 200);
        assert_eq!(
            client(&exact, "[2001:db8:1:2:3::4]:1", &[]).as_deref(),
            Some("2001:db8:1:2:3::4/128")
        );
    }
}
