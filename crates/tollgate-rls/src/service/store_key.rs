//! The store key of a limited descriptor: envoyproxy/ratelimit's cache key
//! without its window start (`GenerateCacheKey` in src/limiter/cache_key.go),
//! `CACHE_KEY_PREFIX + domain + "_" + (key + "_" + value + "_")...`, with a
//! share-threshold pattern in place of the value where one matched.
//!
//! A request's values can be of any length, and the in-memory store keeps
//! each distinct key until its cap pushes it out: 400 calls with 3 MB values
//! held 1.26 GB. So, with [`ServiceSettings::digest_long_keys`] (limits in
//! memory), a key longer than [`MAX_WHOLE_KEY_BYTES`] is kept as its
//! digest: `#sha256:` and the SHA-256 of the whole key in 64 lowercase hex
//! digits, 72 bytes. Every key then costs the store at most 128 bytes
//! besides its entry (docs/RLS.md, "Limits in memory").
//!
//! 128 bytes: a digest is 72, so digesting never lengthens a key, and the
//! keys of the usual descriptors (an IPv6 address, a path, an API key, a
//! host name) stay whole and are not hashed; hashing a key of that length
//! costs about 250 ns, a long one about a millisecond per MB (measured in a
//! release build), a price its sender has paid in bytes already.
//!
//! A digest never equals a whole key: a whole key ends with `_` (the
//! domain's and every value's), and a digest holds no `_` at all; so a
//! local cache key (a store key and its window start in digits) of one
//! never equals one of the other either. Two keys share a digest only if
//! SHA-256 collides.
//!
//! The Redis store is not handed digests: it names every key by the SHA-256
//! of the whole key already (its `keys.rs`), so its key names stay the ones
//! they were, whatever the length.

use sha2::{Digest, Sha256};

use super::service_settings::ServiceSettings;
use crate::config::lookup::MatchedLimit;
use crate::proto::RateLimitDescriptor;

/// The longest key kept whole when long keys are digested.
pub(crate) const MAX_WHOLE_KEY_BYTES: usize = 128;

/// The start of a digest key; a whole key never holds its `#sha256:` with
/// 64 hex digits and no `_` after it (see the module notes).
const DIGEST_MARKER: &str = "#sha256:";

/// The store key of `descriptor`, limited as `matched`, in `domain`.
pub(crate) fn store_key(
    settings: &ServiceSettings,
    domain: &str,
    descriptor: &RateLimitDescriptor,
    matched: &MatchedLimit,
) -> String {
    let parts = Parts {
        prefix: &settings.cache_key_prefix,
        domain,
        descriptor,
        patterns: matched.share_threshold_key_pattern.as_deref(),
    };
    let mut length = 0;
    parts.each(|part| length += part.len());
    if settings.digest_long_keys && length > MAX_WHOLE_KEY_BYTES {
        let mut hasher = Sha256::new();
        parts.each(|part| hasher.update(part.as_bytes()));
        return digest_key(&hasher.finalize());
    }
    let mut key = String::with_capacity(length);
    parts.each(|part| key.push_str(part));
    key
}

/// The parts of a store key, in order.
struct Parts<'a> {
    prefix: &'a str,
    domain: &'a str,
    descriptor: &'a RateLimitDescriptor,
    patterns: Option<&'a [String]>,
}

impl Parts<'_> {
    /// Calls `part` with each part of the key, in order.
    fn each(&self, mut part: impl FnMut(&str)) {
        part(self.prefix);
        part(self.domain);
        part("_");
        for (index, entry) in self.descriptor.entries.iter().enumerate() {
            part(&entry.key);
            part("_");
            let pattern = self
                .patterns
                .and_then(|patterns| patterns.get(index))
                .filter(|pattern| !pattern.is_empty());
            part(pattern.map_or(entry.value.as_str(), String::as_str));
            part("_");
        }
    }
}

/// `#sha256:` and `digest` in lowercase hex.
fn digest_key(digest: &[u8]) -> String {
    let mut key = String::with_capacity(DIGEST_MARKER.len() + 2 * digest.len());
    key.push_str(DIGEST_MARKER);
    for byte in digest {
        key.push(char::from_digit(u32::from(byte >> 4), 16).unwrap_or('0'));
        key.push(char::from_digit(u32::from(byte & 15), 16).unwrap_or('0'));
    }
    key
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::config::rate_limit::{LimitOverride, RateLimit};
    use crate::config::unit::Unit;
    use crate::proto::Entry;

    fn matched(patterns: Option<Vec<String>>) -> MatchedLimit {
        let limit = LimitOverride {
            requests_per_unit: 5,
            unit: Unit::Minute,
        };
        MatchedLimit {
            limit: Arc::new(RateLimit::from_override(limit, Arc::from("d.k"))),
            stats_key: Arc::from("d.k"),
            share_threshold_key_pattern: patterns,
            metadata: None,
        }
    }

    fn key_of(digest: bool, entries: &[(&str, &str)], patterns: Option<Vec<String>>) -> String {
        let settings = ServiceSettings {
            cache_key_prefix: "pre_".to_owned(),
            digest_long_keys: digest,
            ..ServiceSettings::default()
        };
        let descriptor = RateLimitDescriptor {
            entries: entries.iter().map(|(k, v)| Entry::new(*k, *v)).collect(),
            ..RateLimitDescriptor::default()
        };
        store_key(&settings, "d", &descriptor, &matched(patterns))
    }

    #[test]
    fn a_short_key_is_the_go_cache_key_without_its_window() {
        assert_eq!(
            key_of(true, &[("a", "1"), ("b", "2")], None),
            "pre_d_a_1_b_2_"
        );
        assert_eq!(
            key_of(
                true,
                &[("a", "10.0.0.1"), ("b", "2")],
                Some(vec!["10.*".into()])
            ),
            "pre_d_a_10.*_b_2_"
        );
    }

    #[test]
    fn a_key_of_more_than_128_bytes_is_its_digest() {
        // `pre_d_k_` and `_` are 9 bytes: a value of 119 makes a key of 128.
        let whole = "x".repeat(119);
        assert_eq!(
            key_of(true, &[("k", &whole)], None),
            format!("pre_d_k_{whole}_")
        );
        let long = "x".repeat(120);
        let key = key_of(true, &[("k", &long)], None);
        // The SHA-256 of the whole key, 129 bytes, by coreutils:
        // printf 'pre_d_k_%s_' "$(printf 'x%.0s' $(seq 120))" | sha256sum
        assert_eq!(
            key,
            "#sha256:22aba1fd0e55f009d71fc3d12d45606f780e3758e4bd6f6ca544a94fcb4d4d96"
        );
        assert_eq!(key.len(), 72);
        assert!(!key.contains('_'));
        // Without digests (limits in Redis), the key is whole.
        assert_eq!(
            key_of(false, &[("k", &long)], None),
            format!("pre_d_k_{long}_")
        );
    }

    #[test]
    fn a_digest_covers_every_part_of_the_key() {
        let long = "y".repeat(300);
        let keys = [
            key_of(true, &[("k", &long)], None),
            key_of(true, &[("k", &format!("{long}z"))], None),
            key_of(true, &[("k", &long), ("j", "1")], None),
            key_of(true, &[("k", &long), ("j", "2")], None),
            // The same text split differently between key and value.
            key_of(true, &[("ky", &long[1..])], None),
            // A share-threshold pattern in place of the long value.
            key_of(
                true,
                &[("k", &long), ("j", "1")],
                Some(vec![String::new(), "*".into()]),
            ),
        ];
        for (i, a) in keys.iter().enumerate() {
            for b in &keys[i + 1..] {
                assert_ne!(a, b);
            }
        }
        // The same descriptor, the same key.
        assert_eq!(keys[0], key_of(true, &[("k", &long)], None));
    }
}
