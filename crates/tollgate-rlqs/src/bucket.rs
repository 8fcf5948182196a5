//! A quota bucket's identity: Envoy's `BucketId` (a map of string keys to
//! string values, unordered) as the entries of one `tollgate rls`
//! descriptor, and the bounds a bucket must keep.
//!
//! **Order.** A `BucketId` is a map, so its entries have no order, while
//! the YAML's descriptors nest one key inside another. The entries are looked
//! up in the bytewise order of their keys: the bucket `{name: shared}` is the
//! descriptor `(name, shared)`, and `{tenant: a, route: r}` is `(route, r),
//! (tenant, a)`, found by a YAML that nests `tenant` under `route`. Write a
//! multi-entry bucket's descriptors with their keys in that order.

use std::collections::HashMap;

/// The most entries a bucket may have.
pub const MAX_BUCKET_ENTRIES: usize = 32;

/// The most bytes a bucket's keys and values may add up to.
pub const MAX_BUCKET_BYTES: usize = 4096;

/// A bucket's entries, in the order of their keys: the identity the server
/// keeps the bucket under and looks its limit up with.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BucketKey {
    entries: Vec<(String, String)>,
}

/// Why a bucket is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BucketError {
    /// The bucket has no entry (Envoy skips such a bucket too).
    #[error("a bucket has no entry")]
    Empty,
    /// More than [`MAX_BUCKET_ENTRIES`] entries.
    #[error("a bucket has more than {MAX_BUCKET_ENTRIES} entries")]
    TooManyEntries,
    /// Its keys and values add up to more than [`MAX_BUCKET_BYTES`].
    #[error("a bucket's keys and values are over {MAX_BUCKET_BYTES} bytes")]
    TooLong,
}

impl BucketKey {
    /// The key of a `BucketId`'s map.
    ///
    /// # Errors
    ///
    /// [`BucketError`] for an empty map, or one past the bounds.
    pub fn from_map(bucket: &HashMap<String, String>) -> Result<BucketKey, BucketError> {
        if bucket.is_empty() {
            return Err(BucketError::Empty);
        }
        if bucket.len() > MAX_BUCKET_ENTRIES {
            return Err(BucketError::TooManyEntries);
        }
        let bytes: usize = bucket
            .iter()
            .map(|(key, value)| key.len() + value.len())
            .sum();
        if bytes > MAX_BUCKET_BYTES {
            return Err(BucketError::TooLong);
        }
        let mut entries: Vec<(String, String)> = bucket
            .iter()
            .map(|(key, value)| (key.clone(), value.clone()))
            .collect();
        entries.sort();
        Ok(BucketKey { entries })
    }

    /// The entries, in the order of their keys.
    pub fn entries(&self) -> &[(String, String)] {
        &self.entries
    }

    /// The `BucketId` map again.
    pub fn to_map(&self) -> HashMap<String, String> {
        self.entries.iter().cloned().collect()
    }

    /// The entries as `key=value` joined by `,`, for the debug page and logs
    /// when values may be shown.
    pub fn describe(&self) -> String {
        let parts: Vec<String> = self
            .entries
            .iter()
            .map(|(key, value)| format!("{key}={value}"))
            .collect();
        parts.join(",")
    }

    /// The keys alone, values redacted (`key=*`), for the debug page and
    /// logs otherwise.
    pub fn describe_redacted(&self) -> String {
        let parts: Vec<String> = self
            .entries
            .iter()
            .map(|(key, _)| format!("{key}=*"))
            .collect();
        parts.join(",")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(entries: &[(&str, &str)]) -> HashMap<String, String> {
        entries
            .iter()
            .map(|&(key, value)| (key.to_owned(), value.to_owned()))
            .collect()
    }

    #[test]
    fn entries_are_in_the_order_of_their_keys() {
        let key = BucketKey::from_map(&map(&[("tenant", "a"), ("route", "r")])).unwrap();
        assert_eq!(
            key.entries(),
            &[
                ("route".to_owned(), "r".to_owned()),
                ("tenant".to_owned(), "a".to_owned())
            ]
        );
        assert_eq!(key.describe(), "route=r,tenant=a");
        assert_eq!(key.describe_redacted(), "route=*,tenant=*");
    }

    #[test]
    fn empty_huge_and_long_buckets_are_refused() {
        assert_eq!(BucketKey::from_map(&map(&[])), Err(BucketError::Empty));
        let many: HashMap<String, String> = (0..33)
            .map(|index| (format!("k{index}"), String::new()))
            .collect();
        assert_eq!(BucketKey::from_map(&many), Err(BucketError::TooManyEntries));
        let long = "v".repeat(4096);
        assert_eq!(
            BucketKey::from_map(&map(&[("k", &long)])),
            Err(BucketError::TooLong)
        );
        assert!(BucketKey::from_map(&map(&[("k", &long[..4095])])).is_ok());
    }
}
