//! Who a request is, for its limits ([`identify`]): an API key held to its
//! plan, or a keyless request held to a route's keyless budget alone. The
//! rule joins a route's [`ApiKeyRequirement`], the key the request carries,
//! and the list of [`KnownKeys`] with what [`UnknownKeys`] get. The gateway
//! (`tollgate serve`, its decision endpoint) and the tower layer both ask
//! here.
//!
//! ```
//! use tollgate_core::{ApiKeyRequirement, Caller, CallerRefusal, Keyless, KnownKeys, KeyRules, UnknownKeys};
//!
//! let known = KnownKeys::parse(b"sk_a\n").unwrap();
//! let rules = KeyRules { known: Some(&known), unknown: UnknownKeys::Anonymous };
//! let exempt = |_: &str| false;
//! use ApiKeyRequirement::{Optional, Required};
//! assert_eq!(rules.identify(Required, Some("sk_a"), exempt), Ok(Caller::Key("sk_a")));
//! assert_eq!(rules.identify(Required, Some("sk_x"), exempt), Ok(Caller::Keyless(Keyless::Unknown)));
//! assert_eq!(rules.identify(Required, None, exempt), Err(CallerRefusal::NoKey));
//! assert_eq!(rules.identify(Optional, None, exempt), Ok(Caller::Keyless(Keyless::NoKey)));
//! ```

use serde::Deserialize;

use crate::known_keys::{KnownKeys, UnknownKeys};

/// Whether a route needs an API key: in TOML `"required"`, `"optional"` or
/// `"none"`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApiKeyRequirement {
    /// A request without a key is refused (401); one with a key is held to
    /// its plan and the route's budget (the default).
    #[default]
    Required,
    /// A request without a key is held to the route's keyless budget alone
    /// (per client IP, per header); one with a key as under `Required`.
    Optional,
    /// Keys are not read: every request is held to the route's keyless
    /// budget alone (nginx's `limit_req_zone $binary_remote_addr`).
    None,
}

impl ApiKeyRequirement {
    /// Whether the request's credentials are read at all.
    pub fn reads_keys(self) -> bool {
        self != ApiKeyRequirement::None
    }

    /// `required`, `optional` or `none`, as written in a configuration.
    pub fn name(self) -> &'static str {
        match self {
            ApiKeyRequirement::Required => "required",
            ApiKeyRequirement::Optional => "optional",
            ApiKeyRequirement::None => "none",
        }
    }
}

/// Who a request is, for its limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Caller<'a> {
    /// Its API key: held to the key's plan (or exempt) and the route's
    /// budget.
    Key(&'a str),
    /// Held to the route's keyless budget alone, for this reason.
    Keyless(Keyless),
}

/// Why a request is limited as keyless.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Keyless {
    /// It carries no key, on a route where a key is optional.
    NoKey,
    /// Its route does not read keys.
    NotRead,
    /// Its key is not among the known keys, and unknown keys are anonymous:
    /// limited per client IP only (see
    /// [`RouteBudgets::choose_keyless`](crate::RouteBudgets::choose_keyless)).
    Unknown,
}

/// The `key_kind` of every limit of a keyless request in metrics, and its
/// tier in the access log and `tollgate_decisions_total`: its counts stand
/// apart from those of keys (and of a key's route budget per IP).
pub const KEYLESS: &str = "keyless";

/// Why a request is refused before any budget is used (401).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallerRefusal {
    /// It carries no key, and its route requires one.
    NoKey,
    /// Its key is not among the known keys, and unknown keys are refused.
    UnknownKey,
}

/// The rules about keys that hold for every route: the known keys, if a
/// list is kept, and what a key not among them gets.
#[derive(Clone, Copy, Debug, Default)]
pub struct KeyRules<'a> {
    /// The keys that exist; `None` when no list is kept (every key is
    /// taken as it comes).
    pub known: Option<&'a KnownKeys>,
    /// What a key not among `known` gets (ignored without a list).
    pub unknown: UnknownKeys,
}

impl KeyRules<'_> {
    /// Who a request carrying `presented` (its API key, parsed; `None`
    /// without one) is on a route requiring `requirement`.
    ///
    /// - A route that does not read keys: keyless, whatever was sent.
    /// - No key: refused where one is required, keyless where optional.
    /// - An exempt key (`is_exempt`) is known, listed or not.
    /// - A key not among the known keys: refused, keyless (anonymous), or
    ///   taken as it comes, as [`UnknownKeys`] says.
    ///
    /// # Errors
    ///
    /// [`CallerRefusal`]: the request is refused (401) before any budget is
    /// used.
    pub fn identify<'k>(
        &self,
        requirement: ApiKeyRequirement,
        presented: Option<&'k str>,
        is_exempt: impl FnOnce(&str) -> bool,
    ) -> Result<Caller<'k>, CallerRefusal> {
        if requirement == ApiKeyRequirement::None {
            return Ok(Caller::Keyless(Keyless::NotRead));
        }
        let Some(key) = presented else {
            return match requirement {
                ApiKeyRequirement::Required => Err(CallerRefusal::NoKey),
                _ => Ok(Caller::Keyless(Keyless::NoKey)),
            };
        };
        let Some(known) = self.known else {
            return Ok(Caller::Key(key));
        };
        if self.unknown == UnknownKeys::Allow || known.contains(key) || is_exempt(key) {
            return Ok(Caller::Key(key));
        }
        match self.unknown {
            UnknownKeys::Refuse => Err(CallerRefusal::UnknownKey),
            _ => Ok(Caller::Keyless(Keyless::Unknown)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use ApiKeyRequirement::{None as NotRead, Optional, Required};

    fn never(_: &str) -> bool {
        false
    }

    #[test]
    fn without_a_list_every_key_is_taken_as_it_comes() {
        let rules = KeyRules::default();
        for requirement in [Required, Optional] {
            assert_eq!(
                rules.identify(requirement, Some("sk_invented"), never),
                Ok(Caller::Key("sk_invented"))
            );
        }
        assert_eq!(
            rules.identify(Required, None, never),
            Err(CallerRefusal::NoKey)
        );
        assert_eq!(
            rules.identify(Optional, None, never),
            Ok(Caller::Keyless(Keyless::NoKey))
        );
    }

    #[test]
    fn a_route_that_reads_no_keys_is_keyless_whatever_is_sent() {
        let known = KnownKeys::parse(b"sk_a").unwrap();
        for unknown in [
            UnknownKeys::Allow,
            UnknownKeys::Refuse,
            UnknownKeys::Anonymous,
        ] {
            let rules = KeyRules {
                known: Some(&known),
                unknown,
            };
            for presented in [None, Some("sk_a"), Some("sk_x")] {
                assert_eq!(
                    rules.identify(NotRead, presented, |_| panic!("keys are not read")),
                    Ok(Caller::Keyless(Keyless::NotRead))
                );
            }
        }
    }

    #[test]
    fn unknown_keys_are_refused_made_anonymous_or_allowed() {
        let known = KnownKeys::parse(b"sk_a").unwrap();
        let rules = |unknown| KeyRules {
            known: Some(&known),
            unknown,
        };
        for requirement in [Required, Optional] {
            for unknown in [
                UnknownKeys::Allow,
                UnknownKeys::Refuse,
                UnknownKeys::Anonymous,
            ] {
                assert_eq!(
                    rules(unknown).identify(requirement, Some("sk_a"), never),
                    Ok(Caller::Key("sk_a"))
                );
            }
            assert_eq!(
                rules(UnknownKeys::Refuse).identify(requirement, Some("sk_x"), never),
                Err(CallerRefusal::UnknownKey)
            );
            assert_eq!(
                rules(UnknownKeys::Anonymous).identify(requirement, Some("sk_x"), never),
                Ok(Caller::Keyless(Keyless::Unknown))
            );
            assert_eq!(
                rules(UnknownKeys::Allow).identify(requirement, Some("sk_x"), never),
                Ok(Caller::Key("sk_x"))
            );
        }
    }

    #[test]
    fn exempt_keys_are_known_listed_or_not() {
        let known = KnownKeys::parse(b"sk_a").unwrap();
        let rules = KeyRules {
            known: Some(&known),
            unknown: UnknownKeys::Refuse,
        };
        assert_eq!(
            rules.identify(Required, Some("sk_internal"), |key| key == "sk_internal"),
            Ok(Caller::Key("sk_internal"))
        );
    }
}
