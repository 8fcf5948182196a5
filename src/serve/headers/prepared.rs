//! The constant parts of a single policy's rate-limit headers (its
//! `RateLimit-Policy` value, the start of its `RateLimit` value and its
//! `X-RateLimit-Limit`), built once per worker thread and reused for every
//! response held to that policy alone.

use std::cell::RefCell;

use http::HeaderValue;
use tollgate_tower::HeaderTemplate;

/// The prepared headers of one policy, and what they were prepared for.
pub(super) struct Prepared {
    name: Box<str>,
    quota: u64,
    window_s: u64,
    /// `RateLimit-Policy`, and the start of `RateLimit`.
    pub(super) template: HeaderTemplate,
    /// `X-RateLimit-Limit`: the quota.
    pub(super) limit: HeaderValue,
}

/// How many policies a worker thread keeps prepared: tiers times routes is
/// small in practice; past this all are dropped and prepared again as used.
const KEPT: usize = 64;

thread_local! {
    /// This thread's prepared policies, in the order first used.
    static PREPARED: RefCell<Vec<Prepared>> = const { RefCell::new(Vec::new()) };
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
        let found = kept.iter().position(|prepared| {
            prepared.quota == quota && prepared.window_s == window_s && *prepared.name == *name
        });
        let index = match found {
            Some(index) => index,
            None => {
                if kept.len() >= KEPT {
                    kept.clear();
                }
                kept.push(Prepared {
                    name: name.into(),
                    quota,
                    window_s,
                    template: HeaderTemplate::new(name, quota, window_s),
                    limit: HeaderValue::from(quota),
                });
                kept.len() - 1
            }
        };
        use_prepared(&kept[index])
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_policy_is_prepared_for_its_own_name_quota_and_window() {
        let policy = |name, quota, window_s| {
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
        };
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
        for quota in 0..(KEPT as u64 * 2) {
            let expected = format!("\"many\";q={quota};w=1");
            assert_eq!(policy("many", quota, 1).0, expected);
        }
    }
}
