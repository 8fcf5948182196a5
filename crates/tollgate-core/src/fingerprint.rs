//! A key's digest and fingerprint: what stands for an API key wherever it
//! must be told apart but never shown. The digest is an HMAC-SHA-256 of the
//! key's space and the key under a secret (`TOLLGATE_KEY_SECRET`, the same
//! on every gateway), or their plain SHA-256 without one; the Redis store
//! names a key's state by its first 16 bytes, and the access log, the top
//! keys and `tollgate replay` show its first 8 as 16 hex digits: the start
//! of the key's Redis hash tag.

use std::fmt;
use std::sync::Arc;

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

/// Which key space a key belongs to: the same text in two spaces is two
/// keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeySpace {
    /// An API key, limited by its plan.
    Plan,
    /// A key limited by a policy given with the request (a route budget's,
    /// a descriptor's).
    Policy,
}

impl KeySpace {
    fn prefix(self) -> &'static [u8] {
        match self {
            KeySpace::Plan => b"plan\0",
            KeySpace::Policy => b"policy\0",
        }
    }
}

/// The 32-byte digest of `key` in `space`: HMAC-SHA-256 under `secret`
/// when there is one, else SHA-256, of the space's prefix (`plan\0` or
/// `policy\0`) followed by the key.
pub fn key_digest(secret: Option<&[u8]>, space: KeySpace, key: &str) -> [u8; 32] {
    match secret.map(Hmac::<Sha256>::new_from_slice) {
        Some(Ok(mut mac)) => {
            mac.update(space.prefix());
            mac.update(key.as_bytes());
            mac.finalize().into_bytes().into()
        }
        // HMAC takes a key of any length, so this is only the no-secret case.
        _ => {
            let mut hasher = Sha256::new();
            hasher.update(space.prefix());
            hasher.update(key.as_bytes());
            hasher.finalize().into()
        }
    }
}

/// An API key's fingerprint: the first 8 bytes of its digest in the plan
/// space, shown as 16 lowercase hex digits. Equal keys have equal
/// fingerprints; without the secret, a fingerprint confirms no guessed key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Fingerprint(pub [u8; 8]);

impl fmt::Display for Fingerprint {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        for byte in self.0 {
            write!(formatter, "{byte:02x}")?;
        }
        Ok(())
    }
}

/// Makes fingerprints under one secret (none: plain SHA-256).
#[derive(Clone, Default)]
pub struct Fingerprinter {
    secret: Option<Arc<[u8]>>,
}

impl fmt::Debug for Fingerprinter {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("Fingerprinter")
            .field("secret", &self.secret.as_ref().map(|_| "set"))
            .finish()
    }
}

impl Fingerprinter {
    /// Fingerprints under `secret`; `None` or an empty secret: plain SHA-256.
    pub fn new(secret: Option<&[u8]>) -> Self {
        Fingerprinter {
            secret: secret.filter(|secret| !secret.is_empty()).map(Arc::from),
        }
    }

    /// The fingerprint of the API key `key`.
    pub fn of(&self, key: &str) -> Fingerprint {
        self.of_in(KeySpace::Plan, key)
    }

    /// The fingerprint of `key` in `space` (a route budget's key, such as
    /// `orders/ip:192.0.2.7`, is in [`KeySpace::Policy`]).
    pub fn of_in(&self, space: KeySpace, key: &str) -> Fingerprint {
        let digest = key_digest(self.secret.as_deref(), space, key);
        let mut first = [0; 8];
        first.copy_from_slice(&digest[..8]);
        Fingerprint(first)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprints_are_the_digests_first_eight_bytes() {
        // From Python: hashlib.sha256(b"plan\0sk_live_secret") and
        // hmac.new(b"k", b"plan\0sk_live_a", sha256), their first 8 bytes.
        assert_eq!(
            Fingerprinter::new(None).of("sk_live_secret").to_string(),
            "a2fcdabf8da52890"
        );
        assert_eq!(
            Fingerprinter::new(Some(b""))
                .of("sk_live_secret")
                .to_string(),
            "a2fcdabf8da52890"
        );
        assert_eq!(
            Fingerprinter::new(Some(b"k")).of("sk_live_a").to_string(),
            "f1fac54455a305d9"
        );
        assert_eq!(
            format!("{:?}", Fingerprinter::new(Some(b"s3cret"))),
            "Fingerprinter { secret: Some(\"set\") }"
        );
    }
}
