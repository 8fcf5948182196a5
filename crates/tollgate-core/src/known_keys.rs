//! [`KnownKeys`]: the API keys that exist, read from a file of one key or
//! `sha256:` digest per line, and what a request with a key not among them
//! gets ([`UnknownKeys`]). tollgate does not authenticate keys: a list of
//! known keys only stops a client from inventing keys for fresh budgets.
//!
//! ```
//! use tollgate_core::KnownKeys;
//!
//! // `printf %s sk_live_b | sha256sum`
//! let file = "# keys of the API\nsk_live_a\n\
//!     sha256:0e009eec58dcd9b1b8a4749ed7d635eb43f77e4a51ae5cc406419348c2dc9694\n";
//! let known = KnownKeys::parse(file.as_bytes()).unwrap();
//! assert_eq!(known.len(), 2);
//! assert!(known.contains("sk_live_a"));
//! assert!(known.contains("sk_live_b"));
//! assert!(!known.contains("sk_invented"));
//! ```

use std::hash::{BuildHasher, Hasher};

use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::key::ApiKey;

/// The longest key a line may hold, in bytes: the longest a request may carry.
pub const MAX_KNOWN_KEY_LENGTH: usize = 256;

/// What starts a digest line (in any case).
const DIGEST_PREFIX: &str = "sha256:";

/// A SHA-256 digest of a key.
type KeyDigest = [u8; 32];

/// The set of known keys, each kept as its SHA-256 digest (32 bytes and one
/// control byte of a `hashbrown` table, sized once: see
/// [`KnownKeys::memory_bytes`]). Checking a key hashes it once with SHA-256,
/// on the stack, and probes the table once; nothing is allocated.
#[derive(Clone, Default)]
pub struct KnownKeys {
    digests: hashbrown::HashSet<KeyDigest, DigestPrefix>,
}

impl std::fmt::Debug for KnownKeys {
    /// The count only: the digests are not shown.
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "KnownKeys({} keys)", self.digests.len())
    }
}

/// What a request whose key is not among the known keys gets: in TOML
/// `"allow"`, `"refuse"` or `"anonymous"`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UnknownKeys {
    /// Limited by its key's plan like any key (the default, and the only
    /// behaviour without a list): a client that invents keys gets a fresh
    /// budget for each.
    #[default]
    Allow,
    /// Refused (401) before any budget is used.
    Refuse,
    /// Treated as a request without a key: limited per client IP (or the
    /// route's keyless budget), so inventing keys gains nothing.
    Anonymous,
}

/// Why a file of known keys cannot be read. Errors name the line (from 1)
/// and never show the key or the digest written there.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum KnownKeysError {
    /// The file is not UTF-8 text.
    #[error("the file of known keys is not UTF-8 text (line {line})")]
    NotUtf8 {
        /// The first line that is not.
        line: usize,
    },
    /// A `sha256:` line without 64 hexadecimal digits after it.
    #[error(
        "line {line} of the file of known keys is not a digest: sha256: must be followed by \
         64 hexadecimal digits"
    )]
    MalformedDigest {
        /// The line.
        line: usize,
    },
    /// A key longer than a request may carry.
    #[error(
        "line {line} of the file of known keys holds a key longer than \
         {MAX_KNOWN_KEY_LENGTH} bytes, which no request can carry"
    )]
    TooLong {
        /// The line.
        line: usize,
    },
}

impl KnownKeys {
    /// Reads a file's bytes: one entry per line, either a key (read as a
    /// request's key is, [`ApiKey::parse`]: surrounding spaces and a leading
    /// `Bearer ` dropped) or `sha256:` (in any case) and the 64 hexadecimal
    /// digits (either case) of the key's SHA-256 digest, as `printf %s KEY | sha256sum`
    /// prints it. Blank lines and lines starting with `#` are skipped. A key
    /// listed twice counts once.
    ///
    /// # Errors
    ///
    /// [`KnownKeysError`] naming the first bad line; nothing is kept then.
    pub fn parse(bytes: &[u8]) -> Result<KnownKeys, KnownKeysError> {
        let lines = bytes.split(|byte| *byte == b'\n');
        // Grown as entries come (a file of blank lines or comments must not
        // reserve a slot per line), then shrunk to fit.
        let mut digests = hashbrown::HashSet::with_hasher(DigestPrefix);
        for (index, line) in lines.enumerate() {
            let line_number = index + 1;
            let line = std::str::from_utf8(line)
                .map_err(|_| KnownKeysError::NotUtf8 { line: line_number })?;
            let entry = line.trim();
            if entry.is_empty() || entry.starts_with('#') {
                continue;
            }
            let digest = match entry
                .get(..DIGEST_PREFIX.len())
                .filter(|prefix| prefix.eq_ignore_ascii_case(DIGEST_PREFIX))
                .map(|_| &entry[DIGEST_PREFIX.len()..])
            {
                Some(hex) => parse_digest(hex.trim())
                    .ok_or(KnownKeysError::MalformedDigest { line: line_number })?,
                None => {
                    let Some(key) = ApiKey::parse(entry) else {
                        continue;
                    };
                    if key.as_str().len() > MAX_KNOWN_KEY_LENGTH {
                        return Err(KnownKeysError::TooLong { line: line_number });
                    }
                    digest_of(key.as_str())
                }
            };
            digests.insert(digest);
        }
        digests.shrink_to_fit();
        Ok(KnownKeys { digests })
    }

    /// Whether `key` (as a request carries it, already parsed) is known: one
    /// SHA-256 of the key and one table probe, no allocation.
    pub fn contains(&self, key: &str) -> bool {
        !self.digests.is_empty() && self.digests.contains(&digest_of(key))
    }

    /// How many keys are known.
    pub fn len(&self) -> usize {
        self.digests.len()
    }

    /// Whether no key is known.
    pub fn is_empty(&self) -> bool {
        self.digests.is_empty()
    }

    /// The bytes the table holds: 33 per bucket (a digest and a control
    /// byte), its buckets a power of two at most 8/7 of the keys (so 37.7 to
    /// 75.4 bytes per key, 69.2 for a million), plus 16 control bytes.
    pub fn memory_bytes(&self) -> usize {
        let buckets = buckets_for(self.digests.capacity());
        buckets * (std::mem::size_of::<KeyDigest>() + 1) + 16
    }
}

/// hashbrown's bucket count for a table of `capacity` (a power of two
/// holding `capacity` at 7/8 full; 4 or 8 below 8 entries).
fn buckets_for(capacity: usize) -> usize {
    match capacity {
        0 => 0,
        1..=3 => 4,
        4..=7 => 8,
        capacity => (capacity * 8 / 7).next_power_of_two(),
    }
}

/// The SHA-256 digest of `key`'s bytes.
fn digest_of(key: &str) -> KeyDigest {
    Sha256::digest(key.as_bytes()).into()
}

/// The 32 bytes written as 64 hexadecimal digits, if `hex` is that.
fn parse_digest(hex: &str) -> Option<KeyDigest> {
    let hex = hex.as_bytes();
    if hex.len() != 64 {
        return None;
    }
    let mut digest = [0u8; 32];
    for (byte, pair) in digest.iter_mut().zip(hex.chunks_exact(2)) {
        let high = (pair[0] as char).to_digit(16)?;
        let low = (pair[1] as char).to_digit(16)?;
        *byte = u8::try_from(high * 16 + low).ok()?;
    }
    Some(digest)
}

/// Hashes a digest by its first eight bytes: a SHA-256 digest is already
/// uniformly spread, so hashing it again would only cost time. (An attacker
/// who could choose keys colliding in those bytes would need 2^32 work per
/// collision, and would only slow the lookups of one table chain.)
#[derive(Clone, Copy, Default)]
struct DigestPrefix;

impl BuildHasher for DigestPrefix {
    type Hasher = PrefixHasher;

    fn build_hasher(&self) -> PrefixHasher {
        PrefixHasher(None)
    }
}

/// The hasher of [`DigestPrefix`]: the first eight bytes written.
struct PrefixHasher(Option<u64>);

impl Hasher for PrefixHasher {
    fn finish(&self) -> u64 {
        self.0.unwrap_or_default()
    }

    fn write(&mut self, bytes: &[u8]) {
        // The digest's bytes: the first write of eight or more.
        if self.0.is_none()
            && let Some(prefix) = bytes.first_chunk::<8>()
        {
            self.0 = Some(u64::from_le_bytes(*prefix));
        }
    }

    fn write_usize(&mut self, _length: usize) {
        // A slice's length prefix (32 for every digest) says nothing.
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // `printf %s sk_live_a | sha256sum`, computed outside tollgate.
    const SK_LIVE_A: &str = "9f5903b163a543f71c15e02753f60f39ed78790bd0c4f4b62add808395e029c7";

    #[test]
    fn keys_and_digests_are_read_line_by_line() {
        let known = KnownKeys::parse(b"  sk_a  \n\n# a comment\nBearer sk_b\r\nsk_a\n").unwrap();
        assert_eq!(known.len(), 2);
        assert!(known.contains("sk_a"));
        assert!(known.contains("sk_b"));
        assert!(!known.contains("sk_c"));
        assert!(!known.contains("Bearer sk_b"));
    }

    #[test]
    fn a_digest_line_matches_the_key_it_digests() {
        // The digest of "abc" is FIPS 180-2's example.
        let file = "SHA256:BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD\n";
        let known = KnownKeys::parse(file.as_bytes()).unwrap();
        assert!(known.contains("abc"));
        assert!(!known.contains("abd"));
    }

    #[test]
    fn bad_lines_are_named_by_number_and_never_shown() {
        let secret = "sk_secret_value";
        let too_long = "k".repeat(257);
        for (file, expected) in [
            (
                format!("{secret}\nsha256:abc\n"),
                KnownKeysError::MalformedDigest { line: 2 },
            ),
            (
                format!("{secret}\nsha256:{}\n", "g".repeat(64)),
                KnownKeysError::MalformedDigest { line: 2 },
            ),
            (
                format!("{secret}\n{too_long}\n"),
                KnownKeysError::TooLong { line: 2 },
            ),
        ] {
            let error = KnownKeys::parse(file.as_bytes()).unwrap_err();
            assert_eq!(error, expected);
            assert!(!error.to_string().contains(secret));
        }
        let error = KnownKeys::parse(b"sk_a\nsk_\xff\n").unwrap_err();
        assert_eq!(error, KnownKeysError::NotUtf8 { line: 2 });
        assert!(KnownKeys::parse(&"k".repeat(256).into_bytes()).is_ok());
    }

    #[test]
    fn an_empty_list_knows_nothing() {
        let known = KnownKeys::parse(b"\n# none yet\n").unwrap();
        assert!(known.is_empty());
        assert!(!known.contains("sk_a"));
    }

    #[test]
    fn a_key_and_its_digest_are_one_key() {
        let file = format!("sk_live_a\nsha256:{SK_LIVE_A}\n");
        let known = KnownKeys::parse(file.as_bytes()).unwrap();
        assert_eq!(known.len(), 1);
        let digest_only = KnownKeys::parse(format!("sha256:{SK_LIVE_A}").as_bytes()).unwrap();
        assert!(digest_only.contains("sk_live_a"));
    }

    #[test]
    fn a_digest_hashes_as_its_first_eight_bytes() {
        let mut first = [0u8; 32];
        first[..8].copy_from_slice(&0x0102_0304_0506_0708_u64.to_le_bytes());
        let mut second = first;
        second[0] = 0x10;
        assert_eq!(DigestPrefix.hash_one(first), 0x0102_0304_0506_0708);
        assert_eq!(DigestPrefix.hash_one(second), 0x0102_0304_0506_0710);
    }

    #[test]
    fn memory_follows_the_bucket_count() {
        assert_eq!(buckets_for(0), 0);
        assert_eq!(buckets_for(3), 4);
        assert_eq!(buckets_for(7), 8);
        assert_eq!(buckets_for(14), 16);
        // A million keys: 1,142,857 needed, 2^21 buckets.
        assert_eq!(buckets_for(1_000_000), 2_097_152);
    }
}
