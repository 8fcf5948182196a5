//! Certificates for the TLS tests, made by each test (rcgen, never a key
//! file in the repository): a test CA, the certificates it signs, and a
//! directory of the test's own for their files.

#![allow(dead_code, unreachable_pub, missing_docs)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use rustls::pki_types::CertificateDer;
use rustls::{ClientConfig, RootCertStore};

/// A test CA, and the certificates it signs.
pub struct TestCa {
    pub issuer: Issuer<'static, KeyPair>,
    /// The CA certificate, PEM.
    pub pem: String,
    pub der: CertificateDer<'static>,
}

/// A certificate and its key, PEM, and the certificate's DER.
pub struct Issued {
    pub cert_pem: String,
    pub key_pem: String,
    pub der: CertificateDer<'static>,
}

impl TestCa {
    pub fn new(name: &str) -> TestCa {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        let cert = params.self_signed(&key).unwrap();
        TestCa {
            pem: cert.pem(),
            der: cert.der().clone(),
            issuer: Issuer::new(params, key),
        }
    }

    /// A server certificate for `names` (DNS names or IP addresses).
    pub fn issue(&self, names: &[&str]) -> Issued {
        let key = KeyPair::generate().unwrap();
        let names: Vec<String> = names.iter().map(|name| (*name).to_owned()).collect();
        let cert = CertificateParams::new(names)
            .unwrap()
            .signed_by(&key, &self.issuer)
            .unwrap();
        Issued {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            der: cert.der().clone(),
        }
    }

    /// A client configuration trusting this CA only, offering `alpn`.
    pub fn client(&self, alpn: &[&[u8]]) -> ClientConfig {
        let mut roots = RootCertStore::empty();
        roots.add(self.der.clone()).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut client = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        client.alpn_protocols = alpn.iter().map(|protocol| protocol.to_vec()).collect();
        // Every connection makes a full handshake: a resumed session would
        // report the certificate of the session it resumes.
        client.resumption = rustls::client::Resumption::disabled();
        client
    }
}

impl Issued {
    /// Writes `cert.pem` and `key.pem` into `directory`.
    pub fn write(&self, directory: &Path) {
        std::fs::write(directory.join("cert.pem"), &self.cert_pem).unwrap();
        std::fs::write(directory.join("key.pem"), &self.key_pem).unwrap();
    }

    /// A rustls server configuration with this certificate.
    pub fn server(&self) -> rustls::ServerConfig {
        use rustls::pki_types::PrivateKeyDer;
        use rustls::pki_types::pem::PemObject;
        let key = PrivateKeyDer::from_pem_slice(self.key_pem.as_bytes()).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![self.der.clone()], key)
            .unwrap()
    }
}

/// A directory of the test's own for certificate and configuration files.
pub fn directory(test: &str) -> PathBuf {
    let directory = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("tls-{test}-{}", std::process::id()));
    std::fs::create_dir_all(&directory).unwrap();
    directory
}

/// `[tls]` with the `cert.pem` and `key.pem` of `directory`.
pub fn tls_section(directory: &Path) -> String {
    format!(
        "[tls]\ncert = \"{}\"\nkey = \"{}\"\n",
        directory.join("cert.pem").display(),
        directory.join("key.pem").display()
    )
}
