//! TLS to `https://` upstreams: the rustls client configuration that
//! `[upstream_tls]` describes (the system's root certificates, those of a CA
//! file, or, only when `insecure_skip_verify = true`, none checked), built
//! once per configuration, and each upstream's server name (SNI, and the name
//! its certificate must carry).

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, verify_tls12_signature, verify_tls13_signature};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

use crate::config::{RouteConfig, ServeConfigError, UpstreamTlsConfig};
use crate::serve::tls::{provider, read_certificates};

/// How one `https://` upstream is reached: the shared client configuration
/// and the upstream's name.
#[derive(Clone, Debug)]
pub(crate) struct UpstreamTls {
    config: Arc<ClientConfig>,
    server_name: ServerName<'static>,
}

impl UpstreamTls {
    /// TLS to `host` (a DNS name or an IP address, as the upstream URL names
    /// it) with `config`.
    pub(crate) fn new(config: &Arc<ClientConfig>, host: &str) -> Result<Self, &'static str> {
        // `[::1]` in a URL is the IP address ::1.
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let server_name = ServerName::try_from(host.to_owned())
            .map_err(|_| "the upstream host is not a valid TLS server name")?;
        Ok(UpstreamTls {
            config: Arc::clone(config),
            server_name,
        })
    }

    /// Whether `other` is made with the same client configuration (the
    /// same `[upstream_tls]` load).
    pub(crate) fn same_configuration(&self, other: &UpstreamTls) -> bool {
        Arc::ptr_eq(&self.config, &other.config)
    }

    /// The TLS handshake over `stream`, the upstream's name sent (SNI) and
    /// its certificate checked.
    pub(crate) async fn connect(&self, stream: TcpStream) -> std::io::Result<TlsStream<TcpStream>> {
        TlsConnector::from(Arc::clone(&self.config))
            .connect(self.server_name.clone(), stream)
            .await
    }
}

/// The client configuration for the `https://` upstreams of `routes`, built
/// from `config`; `None` when no route has one (nothing is read then).
///
/// # Errors
///
/// [`ServeConfigError::Invalid`] naming `upstream_tls.ca_file` when it cannot
/// be read or holds no certificate, or saying that the system has no root
/// certificates.
pub(crate) fn client_config(
    routes: &[RouteConfig],
    config: &UpstreamTlsConfig,
) -> Result<Option<Arc<ClientConfig>>, ServeConfigError> {
    if !routes.iter().any(RouteConfig::has_https_upstream) {
        return Ok(None);
    }
    let provider = provider();
    let builder = ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(|error| ServeConfigError::Invalid(format!("upstream_tls: {error}")))?;
    let mut client = if config.insecure_skip_verify {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(NoVerification(provider)))
            .with_no_client_auth()
    } else {
        builder
            .with_root_certificates(root_certificates(config)?)
            .with_no_client_auth()
    };
    // The upstream connections speak HTTP/1.1.
    client.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Some(Arc::new(client)))
}

/// The CA certificates of `upstream_tls.ca_file`, or the system's.
fn root_certificates(config: &UpstreamTlsConfig) -> Result<RootCertStore, ServeConfigError> {
    let mut roots = RootCertStore::empty();
    let Some(path) = &config.ca_file else {
        let found = rustls_native_certs::load_native_certs();
        let (added, _) = roots.add_parsable_certificates(found.certs);
        if added == 0 {
            let errors: Vec<String> = found.errors.iter().map(ToString::to_string).collect();
            return Err(ServeConfigError::Invalid(format!(
                "https:// upstreams: no root certificate found in the system's store ({}); \
                 install the ca-certificates package, set SSL_CERT_FILE, or give \
                 upstream_tls.ca_file",
                if errors.is_empty() {
                    "it is empty".to_owned()
                } else {
                    errors.join("; ")
                }
            )));
        }
        return Ok(roots);
    };
    let in_file = |reason: String| {
        ServeConfigError::Invalid(format!("upstream_tls.ca_file {}: {reason}", path.display()))
    };
    for certificate in read_certificates("upstream_tls.ca_file", path)? {
        roots
            .add(certificate)
            .map_err(|error| in_file(error.to_string()))?;
    }
    Ok(roots)
}

/// `insecure_skip_verify = true`: any certificate is taken, its signature
/// of the handshake still checked (the connection is encrypted to whoever
/// holds the certificate's key).
#[derive(Debug)]
struct NoVerification(Arc<CryptoProvider>);

impl ServerCertVerifier for NoVerification {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        certificate: &CertificateDer<'_>,
        signature: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            certificate,
            signature,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        certificate: &CertificateDer<'_>,
        signature: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            certificate,
            signature,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
