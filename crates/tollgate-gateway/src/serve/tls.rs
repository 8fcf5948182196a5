//! HTTPS on the gateway listener: the certificate and key of `[tls]` read
//! from their PEM files, served to every new connection through one rustls
//! configuration (ALPN `h2` then `http/1.1`), and swapped by a reload without
//! touching the connections already open. A reload whose files cannot be
//! used changes nothing: the certificate in force stays.

use std::path::Path;
use std::sync::Arc;

use arc_swap::ArcSwap;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use tokio_rustls::TlsAcceptor;

use crate::config::{ServeConfigError, TlsConfig};

/// The crypto of every TLS connection tollgate makes or accepts: rustls on
/// *ring*.
pub(crate) fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The gateway listener's TLS: the acceptor every worker shares, and the
/// certificate it serves, which a reload replaces.
pub(crate) struct ListenerTls {
    /// Accepts connections with [`ListenerTls::current`]'s certificate.
    pub(crate) acceptor: TlsAcceptor,
    current: Arc<CurrentCertificate>,
}

impl std::fmt::Debug for ListenerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ListenerTls").finish_non_exhaustive()
    }
}

/// A certificate read and checked, not yet in force.
pub(crate) struct LoadedCertificate(Arc<CertifiedKey>);

/// The certificate in force, given to every handshake.
#[derive(Debug)]
struct CurrentCertificate(ArcSwap<CertifiedKey>);

impl ResolvesServerCert for CurrentCertificate {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.load_full())
    }
}

impl ListenerTls {
    /// The listener's TLS with the certificate and key `config` names.
    ///
    /// # Errors
    ///
    /// [`ServeConfigError::Invalid`] naming `tls.cert` or `tls.key` and the
    /// file when one cannot be read or used.
    pub(crate) fn new(config: &TlsConfig) -> Result<Self, ServeConfigError> {
        let LoadedCertificate(certified) = Self::load(config)?;
        let current = Arc::new(CurrentCertificate(ArcSwap::new(certified)));
        let mut server = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|error| ServeConfigError::Invalid(format!("tls: {error}")))?
            .with_no_client_auth()
            .with_cert_resolver(Arc::clone(&current) as Arc<dyn ResolvesServerCert>);
        server.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(ListenerTls {
            acceptor: TlsAcceptor::from(Arc::new(server)),
            current,
        })
    }

    /// Reads and checks the certificate chain and key `config` names (the
    /// key must be the first certificate's), without putting them in force.
    ///
    /// # Errors
    ///
    /// [`ServeConfigError::Invalid`] naming the setting and its file.
    pub(crate) fn load(config: &TlsConfig) -> Result<LoadedCertificate, ServeConfigError> {
        let chain = read_certificates("tls.cert", &config.cert)?;
        let key_pem = read_pem_file("tls.key", &config.key)?;
        let key = PrivateKeyDer::from_pem_slice(&key_pem)
            .map_err(|error| file_error("tls.key", &config.key, &error))?;
        let certified = CertifiedKey::from_der(chain, key, &provider()).map_err(|error| {
            ServeConfigError::Invalid(format!(
                "tls.key {} cannot sign for tls.cert {}: {}",
                config.key.display(),
                config.cert.display(),
                key_error(&error)
            ))
        })?;
        Ok(LoadedCertificate(Arc::new(certified)))
    }

    /// Puts `loaded` in force for the connections accepted from now on.
    pub(crate) fn put_in_force(&self, loaded: LoadedCertificate) {
        self.current.0.store(loaded.0);
    }
}

/// Why a key and a certificate chain do not go together, in words (rustls
/// shows its reasons in their Debug form, `KeyMismatch`).
fn key_error(error: &rustls::Error) -> String {
    match error {
        rustls::Error::InconsistentKeys(rustls::InconsistentKeys::KeyMismatch) => {
            "the key is not the certificate's (their public keys differ)".to_owned()
        }
        rustls::Error::InconsistentKeys(_) => {
            "the key's public key cannot be checked against the certificate's".to_owned()
        }
        other => other.to_string(),
    }
}

/// The certificates of the PEM file `path`, named in errors as `setting`'s
/// (`tls.cert`, `upstream_tls.ca_file`): at least one.
pub(crate) fn read_certificates(
    setting: &str,
    path: &Path,
) -> Result<Vec<CertificateDer<'static>>, ServeConfigError> {
    let pem = read_pem_file(setting, path)?;
    let certificates = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| file_error(setting, path, &error))?;
    if certificates.is_empty() {
        return Err(ServeConfigError::Invalid(format!(
            "{setting} {}: no PEM certificate in the file",
            path.display()
        )));
    }
    Ok(certificates)
}

/// The bytes of `setting`'s file `path`: a regular file of at most
/// `tollgate_serve::MAX_FILE_BYTES` (a reload naming `/dev/zero` or a FIFO is
/// refused, not read for ever).
fn read_pem_file(setting: &str, path: &Path) -> Result<Vec<u8>, ServeConfigError> {
    tollgate_serve::read_regular_file(path, tollgate_serve::MAX_FILE_BYTES).map_err(|error| {
        ServeConfigError::Invalid(format!("{setting} {}: {error}", path.display()))
    })
}

/// `setting`'s file `path` could not be read as PEM.
fn file_error(
    setting: &str,
    path: &Path,
    error: &rustls::pki_types::pem::Error,
) -> ServeConfigError {
    ServeConfigError::Invalid(format!("{setting} {}: {error}", path.display()))
}
