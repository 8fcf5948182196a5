//! The client IP of a request: the peer address, or, behind trusted proxies, the
//! right-most address in `Forwarded` / `X-Forwarded-For` that is not a trusted
//! proxy; IPv4-mapped IPv6 addresses as IPv4, IPv6 clients grouped by prefix.

use std::fmt::Write as _;
use std::net::{IpAddr, SocketAddr};

use forwarded_header_value::ForwardedStanza;
use http::HeaderMap;
use http::header::FORWARDED;
use ipnet::{IpNet, Ipv6Net};

use super::{PeerAddr, RequestParts};

/// The forwarding header that trusted proxies write, and the only one read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ForwardedHeader {
    /// `X-Forwarded-For: client, proxy1, proxy2` (the de facto standard; what
    /// nginx, HAProxy and most load balancers append to).
    #[default]
    XForwardedFor,
    /// `Forwarded: for=client, for=proxy1` (RFC 7239).
    Forwarded,
}

/// Finds the client address of a request and turns it into a bucket key.
///
/// - The peer address comes from the [`PeerAddr`] extension or, with the `axum`
///   feature, axum's `ConnectInfo<SocketAddr>`.
/// - A forwarding header is read only when the peer itself is a trusted proxy,
///   and only the one header the proxies write ([`ForwardedHeader`], default
///   `X-Forwarded-For`); the other is ignored, since a client could write it.
///   The chain (all lines of the header, in order) is walked from the right: the
///   first address that is not a trusted proxy is the client. An entry that is
///   not an IP address (`unknown`, an obfuscated identifier, bad bytes) stops
///   the walk and the last trusted hop is the client, since nothing beyond it
///   can be believed. With no trusted proxies, the headers are never read, so a
///   client cannot choose its own key.
/// - An IPv4-mapped IPv6 address (`::ffff:192.0.2.7`) is its IPv4 address.
/// - IPv6 clients are grouped by their network prefix (default /64, what one
///   subscriber usually holds; providers that delegate /56 or /48 give one
///   subscriber many /64s, so a shorter prefix is stricter).
#[derive(Clone, Debug)]
pub struct ClientIpResolver {
    trusted_proxies: Vec<IpNet>,
    header: ForwardedHeader,
    ipv6_prefix: u8,
}

impl Default for ClientIpResolver {
    fn default() -> Self {
        ClientIpResolver {
            trusted_proxies: Vec::new(),
            header: ForwardedHeader::default(),
            ipv6_prefix: 64,
        }
    }
}

impl ClientIpResolver {
    /// Trusts `proxies` (CIDR networks) to report the client in
    /// `X-Forwarded-For`, and groups IPv6 clients by `ipv6_prefix` bits
    /// (clamped to 128).
    pub fn new(proxies: impl IntoIterator<Item = IpNet>, ipv6_prefix: u8) -> Self {
        ClientIpResolver {
            trusted_proxies: proxies.into_iter().collect(),
            header: ForwardedHeader::default(),
            ipv6_prefix: ipv6_prefix.min(128),
        }
    }

    /// Reads `header` from trusted proxies instead of `X-Forwarded-For`.
    pub fn forwarded_header(mut self, header: ForwardedHeader) -> Self {
        self.header = header;
        self
    }

    /// The client's address, or `None` when the peer address is unknown.
    pub fn client_ip(&self, request: &RequestParts<'_>) -> Option<IpAddr> {
        Some(self.client_ip_of(peer_ip(request)?, request.headers))
    }

    /// The client's address for a connection from `peer` carrying `headers`.
    pub fn client_ip_of(&self, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
        let mut client = peer.to_canonical();
        if !self.is_trusted(client) {
            return client;
        }
        let name = match self.header {
            ForwardedHeader::XForwardedFor => "x-forwarded-for",
            ForwardedHeader::Forwarded => FORWARDED.as_str(),
        };
        // Lines in order, entries in order: walked from the right.
        let lines: Vec<&[u8]> = headers
            .get_all(name)
            .iter()
            .map(|value| value.as_bytes())
            .collect();
        let hops = lines
            .iter()
            .rev()
            .flat_map(|line| line.rsplit(|byte| *byte == b','));
        for hop in hops {
            let Some(hop) = self.parse_hop(hop) else {
                return client;
            };
            client = hop.to_canonical();
            if !self.is_trusted(client) {
                return client;
            }
        }
        client
    }

    /// The bucket key of a connection from `peer` carrying `headers` (see
    /// [`ClientIpResolver::client_key`]).
    pub fn client_key_of(&self, peer: IpAddr, headers: &HeaderMap) -> String {
        let mut key = String::new();
        self.write_key(self.client_ip_of(peer, headers), &mut key);
        key
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
            Some(ip) => {
                self.write_key(ip, out);
                true
            }
            None => false,
        }
    }

    /// Appends `ip`'s bucket key to `out`.
    fn write_key(&self, ip: IpAddr, out: &mut String) {
        match ip {
            IpAddr::V4(v4) => {
                // Dotted quad without the formatting machinery: a digit at
                // a time into room for the longest (15 bytes), which a
                // caller may have reserved already (this is per request).
                out.reserve(15);
                for (index, octet) in v4.octets().into_iter().enumerate() {
                    if index > 0 {
                        out.push('.');
                    }
                    if octet >= 100 {
                        out.push(char::from(b'0' + octet / 100));
                    }
                    if octet >= 10 {
                        out.push(char::from(b'0' + octet / 10 % 10));
                    }
                    out.push(char::from(b'0' + octet % 10));
                }
            }
            IpAddr::V6(v6) => {
                let network = Ipv6Net::new(v6, self.ipv6_prefix).map(|network| network.trunc());
                // Writing to a String cannot fail.
                let _ = match network {
                    Ok(network) => write!(out, "{network}"),
                    Err(_) => write!(out, "{v6}"),
                };
            }
        }
    }

    fn is_trusted(&self, ip: IpAddr) -> bool {
        self.trusted_proxies
            .iter()
            .any(|network| network.contains(&ip))
    }

    /// One entry of the forwarding header as an address; `None` when it is not
    /// one.
    fn parse_hop(&self, hop: &[u8]) -> Option<IpAddr> {
        let hop = std::str::from_utf8(hop).ok()?.trim();
        match self.header {
            ForwardedHeader::XForwardedFor => parse_address(hop),
            ForwardedHeader::Forwarded => hop
                .parse::<ForwardedStanza>()
                .ok()
                .and_then(|stanza| stanza.forwarded_for_ip()),
        }
    }
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

/// An `X-Forwarded-For` hop: an address, possibly with a port or in brackets.
fn parse_address(hop: &str) -> Option<IpAddr> {
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
    fn an_ipv4_key_is_its_dotted_quad_at_every_width() {
        // Octets of one, two and three digits, and their edges, in every
        // place: written by hand, as the address is written in the request.
        let resolver = ClientIpResolver::default();
        for address in [
            "0.0.0.0",
            "9.10.99.100",
            "100.99.10.9",
            "255.255.255.255",
            "192.0.2.7",
            "1.200.30.4",
        ] {
            let peer = format!("{address}:80");
            assert_eq!(client(&resolver, &peer, &[]).as_deref(), Some(address));
        }
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
    fn only_the_configured_header_is_read() {
        let xff = trusting(&["10.0.0.0/8"]);
        let both = [
            ("forwarded", "for=6.6.6.6"),
            ("x-forwarded-for", "203.0.113.9"),
        ];
        assert_eq!(
            client(&xff, "10.0.0.1:80", &both).as_deref(),
            Some("203.0.113.9")
        );
        let forwarded = trusting(&["10.0.0.0/8"]).forwarded_header(ForwardedHeader::Forwarded);
        let both = [
            ("forwarded", "for=203.0.113.9"),
            ("x-forwarded-for", "6.6.6.6"),
        ];
        assert_eq!(
            client(&forwarded, "10.0.0.1:80", &both).as_deref(),
            Some("203.0.113.9")
        );
        let chain = [(
            "forwarded",
            "for=198.51.100.1, for=\"[2001:db8:cafe::17]:4711\";proto=https",
        )];
        assert_eq!(
            client(&forwarded, "10.0.0.1:80", &chain).as_deref(),
            Some("2001:db8:cafe::/64")
        );
    }

    #[test]
    fn a_bad_entry_stops_the_walk_at_the_last_trusted_hop_only() {
        let resolver = trusting(&["10.0.0.0/8"]);
        // The bad entry is left of the client: the client is still found.
        let left = [("x-forwarded-for", "garbage, 203.0.113.9")];
        assert_eq!(
            client(&resolver, "10.0.0.1:80", &left).as_deref(),
            Some("203.0.113.9")
        );
        let forwarded = trusting(&["10.0.0.0/8"]).forwarded_header(ForwardedHeader::Forwarded);
        let left = [("forwarded", "garbage;;==, for=203.0.113.9")];
        assert_eq!(
            client(&forwarded, "10.0.0.1:80", &left).as_deref(),
            Some("203.0.113.9")
        );
        // Bad bytes on an earlier line do not spoil a good later line.
        let mut extensions = Extensions::new();
        extensions.insert(PeerAddr("10.0.0.1:80".parse().unwrap()));
        let mut map = HeaderMap::new();
        map.append(
            "x-forwarded-for",
            HeaderValue::from_bytes(b"\xff\xfe").unwrap(),
        );
        map.append("x-forwarded-for", HeaderValue::from_static("203.0.113.9"));
        let request = RequestParts {
            method: &Method::GET,
            uri: &Uri::from_static("/"),
            headers: &map,
            extensions: &extensions,
        };
        assert_eq!(
            resolver.client_key(&request).as_deref(),
            Some("203.0.113.9")
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
