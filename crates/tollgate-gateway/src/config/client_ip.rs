//! `[client_ip]`: how the client IP of a request is found behind trusted
//! proxies.

use ipnet::IpNet;
use serde::Deserialize;

use super::ServeConfigError;

/// How the client IP of a request is found.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientIpConfig {
    /// Proxies trusted to report the client in the forwarding header.
    #[serde(default)]
    pub trusted_proxies: Vec<IpNet>,
    /// The forwarding header those proxies write, and the only one read:
    /// `"x-forwarded-for"` (default) or `"forwarded"` (RFC 7239).
    #[serde(default)]
    pub header: ForwardingHeader,
    /// IPv6 clients are grouped by this prefix length. Default 64.
    #[serde(default = "default_ipv6_prefix")]
    pub ipv6_prefix: u8,
}

/// The forwarding header trusted proxies write.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ForwardingHeader {
    /// `X-Forwarded-For`.
    #[default]
    XForwardedFor,
    /// `Forwarded` (RFC 7239).
    Forwarded,
}

impl From<ForwardingHeader> for tollgate_tower::ForwardedHeader {
    fn from(header: ForwardingHeader) -> Self {
        match header {
            ForwardingHeader::XForwardedFor => tollgate_tower::ForwardedHeader::XForwardedFor,
            ForwardingHeader::Forwarded => tollgate_tower::ForwardedHeader::Forwarded,
        }
    }
}

impl ClientIpConfig {
    /// The resolver these settings describe.
    pub(crate) fn resolver(&self) -> tollgate_tower::ClientIpResolver {
        tollgate_tower::ClientIpResolver::new(
            self.trusted_proxies.iter().copied(),
            self.ipv6_prefix,
        )
        .forwarded_header(self.header.into())
    }

    pub(super) fn validate(&self) -> Result<(), ServeConfigError> {
        if self.ipv6_prefix > 128 {
            return Err(ServeConfigError::Invalid(format!(
                "client_ip.ipv6_prefix must be from 0 to 128, got {}",
                self.ipv6_prefix
            )));
        }
        Ok(())
    }
}

impl Default for ClientIpConfig {
    fn default() -> Self {
        ClientIpConfig {
            trusted_proxies: Vec::new(),
            header: ForwardingHeader::default(),
            ipv6_prefix: default_ipv6_prefix(),
        }
    }
}

fn default_ipv6_prefix() -> u8 {
    64
}
