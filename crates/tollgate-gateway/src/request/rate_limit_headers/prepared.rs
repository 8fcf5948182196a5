//! The constant parts of a single policy's rate-limit headers (its
//! `RateLimit-Policy` value, the start of its `RateLimit` value and its
//! `X-RateLimit-Limit`), built once per worker thread and reused for every
//! response held to that policy alone.

use std::cell::RefCell;

use hashbrown::HashMap;
use http::HeaderValue;
use tollgate_tower::HeaderTemplate;

/// The prepared headers of one policy, and the quota and window they were
/// prepared for (the name is the key they are kept under).
#[derive(Clone)]
pub(super) struct Prepared {
    quota: u64,
    window_s: u64,
    /// `RateLimit-Policy`, and the start of `RateLimit`.
    pub(super) template: HeaderTemplate,
    /// `X-RateLimit-Limit`: the quota.
    pub(super) limit: HeaderValue,
}

/// How many policy names a worker thread keeps prepared (tiers and routes:
/// few in practice); past this all are dropped and prepared again as used.
const NAMES_KEPT: usize = 1024;

/// How many quotas and windows of one name are kept (a name's policy changes
/// only when an operator changes it); past this, that name's are dropped.
const POLICIES_PER_NAME: usize = 8;

/// A worker thread's prepared policies.
#[derive(Default)]
struct Kept {
    /// By name.
    by_name: HashMap<String, Vec<Prepared>>,
    /// The policy used last, tried first: a gateway's responses are mostly
    /// held to one policy (the default plan), so most lookups end here
    /// without hashing the name.
    last: Option<Last>,
}

/// The policy a thread used last, and its name.
struct Last {
    name: String,
    prepared: Prepared,
}

thread_local! {
    /// This thread's prepared policies.
    static PREPARED: RefCell<Kept> = RefCell::new(Kept::default());
}

/// Calls `use_prepared` with the prepared headers of the policy named `name`
/// with `quota` units per `window_s` seconds, preparing them on first use.
pub(super) fn with_template<T>(
    name: &str,
    quota: u64,
    window_s: u64,
    use_prepared: impl FnOnce(&Prepared) -> T,
) -> T {
    PREPARED.with_borrow_mut(|kept| {
        if let Some(last) = &kept.last
            && last.prepared.quota == quota
            && last.prepared.window_s == window_s
            && last.name == name
        {
            return use_prepared(&last.prepared);
        }
        let by_name = &mut kept.by_name;
        if by_name.len() >= NAMES_KEPT && !by_name.contains_key(name) {
            by_name.clear();
        }
        let policies = by_name.entry_ref(name).or_default();
        let found = policies
            .iter()
            .position(|prepared| prepared.quota == quota && prepared.window_s == window_s);
        let index = match found {
            Some(index) => index,
            None => {
                if policies.len() >= POLICIES_PER_NAME {
                    policies.clear();
                }
                policies.push(Prepared {
                    quota,
                    window_s,
                    template: HeaderTemplate::new(name, quota, window_s),
                    limit: HeaderValue::from(quota),
                });
                policies.len() - 1
            }
        };
        let prepared = policies[index].clone();
        let answer = use_prepared(&prepared);
        match &mut kept.last {
            // The name's buffer is reused: no allocation once it is long enough.
            Some(last) => {
                last.name.clear();
                last.name.push_str(name);
                last.prepared = prepared;
            }
            None => {
                kept.last = Some(Last {
                    name: name.to_owned(),
                    prepared,
                });
            }
        }
        answer
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `RateLimit-Policy` and `X-RateLimit-Limit` values prepared.
    fn policy(name: &str, quota: u64, window_s: u64) -> (String, String) {
        with_template(name, quota, window_s, |prepared| {
            (
                prepared
                    .template
                    .policy()
                    .to_str()
                    .unwrap_or_default()
                    .to_owned(),
                prepared.limit.to_str().unwrap_or_default().to_owned(),
            )
        })
    }

    #[test]
    fn each_policy_is_prepared_for_its_own_name_quota_and_window() {
        assert_eq!(
            policy("gold", 10, 60),
            ("\"gold\";q=10;w=60".to_owned(), "10".to_owned())
        );
        assert_eq!(
            policy("gold", 10, 30),
            ("\"gold\";q=10;w=30".to_owned(), "10".to_owned())
        );
        assert_eq!(
            policy("gold", 20, 60),
            ("\"gold\";q=20;w=60".to_owned(), "20".to_owned())
        );
        assert_eq!(
            policy("free", 10, 60),
            ("\"free\";q=10;w=60".to_owned(), "10".to_owned())
        );
        assert_eq!(
            policy("gold", 10, 60),
            ("\"gold\";q=10;w=60".to_owned(), "10".to_owned())
        );
        // Many quotas of one name, and many names: each still its own.
        for quota in 0..(POLICIES_PER_NAME as u64 * 2) {
            let expected = format!("\"many\";q={quota};w=1");
            assert_eq!(policy("many", quota, 1).0, expected);
        }
        for index in 0..(NAMES_KEPT * 2) {
            let name = format!("tier{index}");
            let expected = format!("\"{name}\";q=7;w=60");
            assert_eq!(policy(&name, 7, 60).0, expected);
        }
        assert_eq!(policy("gold", 10, 60).0, "\"gold\";q=10;w=60");
    }
}
