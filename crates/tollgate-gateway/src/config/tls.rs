//! `[tls]`: the gateway listener's certificate and private key (PEM files),
//! read at start and again on every reload. Without the section the gateway
//! listener speaks plain HTTP; the admin listener always does.

use std::path::PathBuf;

use serde::Deserialize;

/// The gateway listener's certificate, for HTTPS (HTTP/1.1 and HTTP/2,
/// chosen by ALPN).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsConfig {
    /// The certificate chain, PEM: the server's certificate first, then the
    /// intermediates.
    pub cert: PathBuf,
    /// The certificate's private key, PEM (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
}
