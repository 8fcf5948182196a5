//! `[upstream_tls]`: how the gateway checks the certificates of `https://`
//! upstreams: against the system's root certificates (the default), or the
//! certificates of a CA file; never unchecked unless
//! `insecure_skip_verify = true` says so.

use std::path::PathBuf;

use serde::Deserialize;

/// The checking of `https://` upstreams' certificates.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpstreamTlsConfig {
    /// A PEM file of the CA certificates that upstream certificates must
    /// chain to, in place of the system's root certificates. Default: none,
    /// the system's (as `rustls-native-certs` finds them: `SSL_CERT_FILE`,
    /// `SSL_CERT_DIR`, else the distribution's store).
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
    /// Accept any certificate from `https://` upstreams, whoever signed it
    /// and whatever name it has: the connection is encrypted but anyone on
    /// the path can pose as the upstream. Default false; true is warned
    /// about at start and on every reload.
    #[serde(default)]
    pub insecure_skip_verify: bool,
}

impl UpstreamTlsConfig {
    /// The warning `insecure_skip_verify = true` deserves, if set.
    pub(super) fn warning(&self) -> Option<String> {
        self.insecure_skip_verify.then(|| {
            "upstream_tls.insecure_skip_verify = true: the certificates of https:// upstreams \
             are not checked, so anyone on the network path can pose as an upstream"
                .to_owned()
        })
    }
}

impl UpstreamTlsConfig {
    /// Refuses a CA file beside `insecure_skip_verify`: one of them would be
    /// ignored.
    pub(super) fn validate(&self) -> Result<(), super::ServeConfigError> {
        if self.ca_file.is_some() && self.insecure_skip_verify {
            return Err(super::ServeConfigError::Invalid(
                "upstream_tls: set ca_file or insecure_skip_verify, not both (a CA file is \
                 of no use when nothing is checked)"
                    .into(),
            ));
        }
        Ok(())
    }
}
