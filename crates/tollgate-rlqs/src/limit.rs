//! A bucket's limit: the `tollgate rls` YAML's descriptor lookup
//! (`RateLimitConfig::get_limit`, with its values, wildcards, default keys,
//! `unlimited` and `shadow_mode`) on the bucket's entries, and what the
//! server hands out for it.

use tollgate_core::{Algorithm, COUNTED_WINDOW_S, QuotaRate};
use tollgate_rls::{Enforcement, NoStats, RateLimitConfig};

use crate::bucket::BucketKey;

/// What a bucket's Envoys are told.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BucketLimit {
    /// Every request allowed: no descriptor matches (as `tollgate rls` answers
    /// `OK`), `unlimited: true`, `shadow_mode: true`, or no configuration.
    AllowAll,
    /// Every request refused: `requests_per_unit: 0`.
    DenyAll,
    /// One limit shared by every Envoy that reports the bucket, as its rate
    /// (a token bucket, a sliding log, a fixed window under a minute).
    Shared(QuotaRate),
    /// A fixed window of a minute or more (`tokens` per `per_s` seconds):
    /// the fleet's reported requests counted against each window, what is
    /// left spread over its time left (`tollgate_core::WindowCount`).
    Window(QuotaRate),
}

impl BucketLimit {
    /// The limit's own rate, for the limits that are shared.
    pub fn rate(&self) -> Option<QuotaRate> {
        match *self {
            BucketLimit::Shared(rate) | BucketLimit::Window(rate) => Some(rate),
            BucketLimit::AllowAll | BucketLimit::DenyAll => None,
        }
    }
}

/// A bucket's limit in `config`, and whether the matched descriptor asks for
/// `detailed_metric` (so that its values may be shown).
pub fn resolve(
    config: Option<&RateLimitConfig>,
    domain: &str,
    bucket: &BucketKey,
) -> (BucketLimit, bool) {
    let Some(config) = config else {
        return (BucketLimit::AllowAll, false);
    };
    let Some(matched) = config.get_limit(domain, bucket.entries(), None, &NoStats) else {
        return (BucketLimit::AllowAll, false);
    };
    let limit = &matched.limit;
    let detailed = limit.detailed_metric;
    if limit.unlimited || limit.shadow_mode {
        return (BucketLimit::AllowAll, detailed);
    }
    let resolved = match &limit.enforcement {
        Enforcement::Unlimited | Enforcement::NoWindow => BucketLimit::AllowAll,
        Enforcement::Deny { .. } => BucketLimit::DenyAll,
        Enforcement::Policy(policy)
            if policy.algorithm() == Algorithm::FixedWindow
                && policy.window_s() >= COUNTED_WINDOW_S =>
        {
            BucketLimit::Window(QuotaRate::of_policy(policy))
        }
        Enforcement::Policy(policy) => BucketLimit::Shared(QuotaRate::of_policy(policy)),
    };
    (resolved, detailed)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use tollgate_rls::LoaderOptions;

    use super::*;

    fn config(yaml: &str) -> RateLimitConfig {
        RateLimitConfig::from_sources(&[("edge.yaml", yaml)], &LoaderOptions::default()).unwrap()
    }

    fn bucket(entries: &[(&str, &str)]) -> BucketKey {
        let map: HashMap<String, String> = entries
            .iter()
            .map(|&(key, value)| (key.to_owned(), value.to_owned()))
            .collect();
        BucketKey::from_map(&map).unwrap()
    }

    const YAML: &str = "
domain: edge
descriptors:
  - key: name
    value: shared
    rate_limit: {unit: second, requests_per_unit: 100}
  - key: name
    value: closed
    rate_limit: {unit: minute, requests_per_unit: 0}
  - key: name
    value: free
    rate_limit: {unlimited: true}
  - key: name
    value: dry
    shadow_mode: true
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: route
    value: api
    descriptors:
      - key: tenant
        detailed_metric: true
        rate_limit: {unit: minute, requests_per_unit: 600}
";

    #[test]
    fn a_bucket_is_looked_up_as_one_descriptor() {
        let config = config(YAML);
        let rate = |tokens, per_s, burst| {
            BucketLimit::Shared(QuotaRate {
                tokens,
                per_s,
                burst,
            })
        };
        let found = |entries: &[(&str, &str)]| resolve(Some(&config), "edge", &bucket(entries));
        assert_eq!(found(&[("name", "shared")]), (rate(100, 1, 100), false));
        assert_eq!(found(&[("name", "closed")]), (BucketLimit::DenyAll, false));
        assert_eq!(found(&[("name", "free")]), (BucketLimit::AllowAll, false));
        assert_eq!(found(&[("name", "dry")]), (BucketLimit::AllowAll, false));
        assert_eq!(found(&[("name", "other")]), (BucketLimit::AllowAll, false));
        // Two entries, in the order of their keys: route, then tenant.
        // A fixed window of a minute: counted.
        assert_eq!(
            found(&[("tenant", "t1"), ("route", "api")]),
            (
                BucketLimit::Window(QuotaRate {
                    tokens: 600,
                    per_s: 60,
                    burst: 10
                }),
                true
            )
        );
        assert_eq!(
            resolve(Some(&config), "other", &bucket(&[("name", "shared")])),
            (BucketLimit::AllowAll, false)
        );
        assert_eq!(
            resolve(None, "edge", &bucket(&[("name", "shared")])),
            (BucketLimit::AllowAll, false)
        );
    }
}
