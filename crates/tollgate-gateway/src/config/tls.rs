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

impl super::ServeConfig {
    /// The lines of `tollgate check-config` about TLS: the listener's
    /// certificate, how `https://` upstreams are checked (when a route has
    /// one), and the CA file of a `rediss://` store.
    pub(super) fn tls_summary(&self) -> Vec<String> {
        let mut lines = Vec::new();
        if let Some(tls) = &self.tls {
            lines.push(format!(
                "HTTPS on {} (HTTP/2 and HTTP/1.1 by ALPN) with the certificate {} and the key \
                 {}, read again on every reload",
                self.listen,
                tls.cert.display(),
                tls.key.display()
            ));
        }
        if self
            .routes
            .iter()
            .any(super::RouteConfig::has_https_upstream)
        {
            lines.push(
                match (
                    &self.upstream_tls.ca_file,
                    self.upstream_tls.insecure_skip_verify,
                ) {
                    (_, true) => "https:// upstreams: certificates NOT checked \
                              (upstream_tls.insecure_skip_verify)"
                        .to_owned(),
                    (Some(path), false) => format!(
                        "https:// upstreams: certificates checked against the CA file {}",
                        path.display()
                    ),
                    (None, false) => {
                        "https:// upstreams: certificates checked against the system's root \
                     certificates"
                            .to_owned()
                    }
                },
            );
        }
        if let (Some(_), Some(path)) = (&self.store.url, &self.store.ca_file) {
            lines.push(format!(
                "Redis over TLS: its certificate checked against the CA file {}",
                path.display()
            ));
        }
        lines
    }
}

#[cfg(test)]
mod tests {
    use super::super::ServeConfig;

    #[test]
    fn check_config_names_the_tls_in_force() {
        let config = ServeConfig::from_toml_str(
            "listen = \"127.0.0.1:8443\"\n\
             [tls]\ncert = \"/etc/tollgate/cert.pem\"\nkey = \"/etc/tollgate/key.pem\"\n\
             [upstream_tls]\nca_file = \"/etc/tollgate/ca.pem\"\n\
             [store]\nurl = \"rediss://127.0.0.1:6380\"\nca_file = \"/etc/tollgate/redis-ca.pem\"\n\
             [[routes]]\nprefix = \"/\"\nupstream = \"https://backend.internal\"\n",
        )
        .unwrap();
        assert_eq!(
            config.tls_summary(),
            [
                "HTTPS on 127.0.0.1:8443 (HTTP/2 and HTTP/1.1 by ALPN) with the certificate \
                 /etc/tollgate/cert.pem and the key /etc/tollgate/key.pem, read again on every \
                 reload",
                "https:// upstreams: certificates checked against the CA file /etc/tollgate/ca.pem",
                "Redis over TLS: its certificate checked against the CA file \
                 /etc/tollgate/redis-ca.pem",
            ]
        );
        let insecure = ServeConfig::from_toml_str(
            "[upstream_tls]\ninsecure_skip_verify = true\n\
             [[routes]]\nprefix = \"/\"\nupstream = \"https://backend.internal\"\n",
        )
        .unwrap();
        assert_eq!(
            insecure.tls_summary(),
            ["https:// upstreams: certificates NOT checked (upstream_tls.insecure_skip_verify)"]
        );
        assert_eq!(
            insecure.warnings(),
            [
                "upstream_tls.insecure_skip_verify = true: the certificates of https:// \
                 upstreams are not checked, so anyone on the network path can pose as an \
                 upstream"
            ]
        );
        assert!(
            ServeConfig::from_toml_str("")
                .unwrap()
                .tls_summary()
                .is_empty()
        );
    }
}
