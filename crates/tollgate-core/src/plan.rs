//! A plan's policies: one policy, or a list of named policies that every
//! request of the plan is held to at once ("10 per second and 10,000 per
//! day"), with their document forms (TOML, JSON) and the rules for names.
//!
//! The one-policy form is a policy object, as it always was; the list form is
//! an array of policy objects each with a `name`:
//!
//! ```
//! use tollgate_core::{PlanPolicies, Policy};
//!
//! let plan: PlanPolicies = serde_json::from_str(
//!     r#"[{"name": "second", "algorithm": "fixed_window", "limit": 10, "window_s": 1},
//!         {"name": "day", "algorithm": "fixed_window", "limit": 10000, "window_s": 86400}]"#,
//! )
//! .unwrap();
//! let names: Vec<_> = plan.policies().map(|(name, _)| name).collect();
//! assert_eq!(names, [Some("second"), Some("day")]);
//! assert_eq!(plan.first(), Some(Policy::fixed_window(10, 1).unwrap()));
//! ```

use std::fmt;

use serde::de::value::{MapAccessDeserializer, SeqAccessDeserializer};
use serde::de::{MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::calendar::CalendarPeriod;
use crate::policy::{
    Algorithm, DocumentFields, Policy, PolicyError, present_bool, present_integer,
};

/// The most policies one plan may list.
pub const MAX_PLAN_POLICIES: usize = 16;

/// The longest name of a plan's policy, in bytes.
pub const MAX_POLICY_NAME: usize = 64;

/// A policy of a plan written as a list, with its name: the item name of the
/// `RateLimit-Policy` and `RateLimit` header fields, and part of its state's
/// key.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct NamedPolicy {
    /// 1 to [`MAX_POLICY_NAME`] characters of an HTTP token (RFC 9110's
    /// `tchar`: letters, digits and ``!#$%&'*+-.^_`|~``), unique in its plan.
    pub name: String,
    /// The policy.
    pub policy: Policy,
}

/// What limits the keys of one plan (a tier, or the default): one policy, or
/// a list of named policies all held at once, all or nothing: a request
/// passes only if every one allows it, and a refused request uses nothing of
/// any of them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PlanPolicies {
    /// One policy: the form of a policy object.
    One(Policy),
    /// 1 to [`MAX_PLAN_POLICIES`] named policies, names unique; a list of
    /// one decides as [`PlanPolicies::One`] of its policy, and keeps the same
    /// state.
    List(Vec<NamedPolicy>),
}

/// Why a plan's list of policies is invalid.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// The list is empty.
    #[error("a list of policies needs at least one policy")]
    Empty,
    /// The list is longer than [`MAX_PLAN_POLICIES`].
    #[error("a plan lists at most {MAX_PLAN_POLICIES} policies, got {0}")]
    TooMany(usize),
    /// A name is empty, too long or not an HTTP token.
    #[error(
        "invalid policy name {0:?}: a name is 1 to {MAX_POLICY_NAME} letters, digits or \
         !#$%&'*+-.^_`|~ (an HTTP token)"
    )]
    Name(String),
    /// Two policies of the plan share a name.
    #[error("policy name {0:?} is given twice in one plan")]
    Duplicate(String),
}

impl PlanPolicies {
    /// The plan's first policy: the one policy, or the first of the list
    /// (whose state is kept as the one policy's is); `None` for an empty
    /// list, which [`PlanPolicies::validate`] refuses.
    pub fn first(&self) -> Option<Policy> {
        match self {
            PlanPolicies::One(policy) => Some(*policy),
            PlanPolicies::List(list) => list.first().map(|named| named.policy),
        }
    }

    /// Every policy with its name (`None` for the one-policy form), in order.
    pub fn policies(&self) -> impl Iterator<Item = (Option<&str>, Policy)> {
        let (one, list) = match self {
            PlanPolicies::One(policy) => (Some(*policy), &[][..]),
            PlanPolicies::List(list) => (None, &list[..]),
        };
        one.map(|policy| (None, policy)).into_iter().chain(
            list.iter()
                .map(|named| (Some(named.name.as_str()), named.policy)),
        )
    }

    /// How many policies the plan holds a request to.
    pub fn len(&self) -> usize {
        match self {
            PlanPolicies::One(_) => 1,
            PlanPolicies::List(list) => list.len(),
        }
    }

    /// Whether the plan has no policy (an empty list, which is invalid).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Checks a list: 1 to [`MAX_PLAN_POLICIES`] policies, each name an HTTP
    /// token of at most [`MAX_POLICY_NAME`] bytes, no name twice.
    ///
    /// # Errors
    ///
    /// The first [`PlanError`] found.
    pub fn validate(&self) -> Result<(), PlanError> {
        let PlanPolicies::List(list) = self else {
            return Ok(());
        };
        if list.is_empty() {
            return Err(PlanError::Empty);
        }
        if list.len() > MAX_PLAN_POLICIES {
            return Err(PlanError::TooMany(list.len()));
        }
        for (index, named) in list.iter().enumerate() {
            check_name(&named.name)?;
            if list[..index].iter().any(|other| other.name == named.name) {
                return Err(PlanError::Duplicate(named.name.clone()));
            }
        }
        Ok(())
    }

    /// Reads a plan from any serde deserializer (a JSON document, say): a
    /// policy object, or an array of them each with a `name`. A field given
    /// twice is refused, and so is a list [`PlanPolicies::validate`] refuses.
    ///
    /// # Errors
    ///
    /// [`PolicyError::Malformed`] naming the offending place
    /// (`[1].name: ...`), or the errors of [`Policy::new`].
    pub fn from_deserializer<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Self, PolicyError> {
        serde_path_to_error::deserialize(deserializer).map_err(|error| {
            let path = error.path().to_string();
            let inner = error.into_inner();
            if path == "." {
                PolicyError::Malformed(inner.to_string())
            } else {
                PolicyError::Malformed(format!("{path}: {inner}"))
            }
        })
    }
}

/// Whether `name` is a valid policy name.
fn check_name(name: &str) -> Result<(), PlanError> {
    let tchar = |byte: u8| byte.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&byte);
    if name.is_empty() || name.len() > MAX_POLICY_NAME || !name.bytes().all(tchar) {
        return Err(PlanError::Name(name.to_owned()));
    }
    Ok(())
}

/// A named policy's document form: `name` beside the policy's fields.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a policy object with a name")]
struct NamedDocument {
    name: String,
    algorithm: Algorithm,
    limit: u64,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present_integer"
    )]
    window_s: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    window: Option<CalendarPeriod>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    time_zone: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    week_starts: Option<String>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present_integer"
    )]
    burst: Option<u64>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present_bool"
    )]
    count_refused: Option<bool>,
}

impl Serialize for NamedPolicy {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let fields = self.policy.document_fields();
        NamedDocument {
            name: self.name.clone(),
            algorithm: fields.algorithm,
            limit: fields.limit,
            window_s: fields.window_s,
            window: fields.window,
            time_zone: fields.time_zone,
            week_starts: fields.week_starts,
            burst: fields.burst,
            count_refused: fields.count_refused,
        }
        .serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for NamedPolicy {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let document = NamedDocument::deserialize(deserializer)?;
        check_name(&document.name).map_err(serde::de::Error::custom)?;
        let policy = Policy::from_document_fields(DocumentFields {
            algorithm: document.algorithm,
            limit: document.limit,
            window_s: document.window_s,
            window: document.window,
            time_zone: document.time_zone,
            week_starts: document.week_starts,
            burst: document.burst,
            count_refused: document.count_refused,
        })
        .map_err(serde::de::Error::custom)?;
        Ok(NamedPolicy {
            name: document.name,
            policy,
        })
    }
}

impl Serialize for PlanPolicies {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            PlanPolicies::One(policy) => policy.serialize(serializer),
            PlanPolicies::List(list) => list.serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for PlanPolicies {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct PlanVisitor;
        impl<'de> Visitor<'de> for PlanVisitor {
            type Value = PlanPolicies;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a policy object, or an array of policy objects each with a name")
            }

            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<PlanPolicies, A::Error> {
                Policy::deserialize(MapAccessDeserializer::new(map)).map(PlanPolicies::One)
            }

            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<PlanPolicies, A::Error> {
                let list = Vec::<NamedPolicy>::deserialize(SeqAccessDeserializer::new(seq))?;
                let plan = PlanPolicies::List(list);
                plan.validate().map_err(serde::de::Error::custom)?;
                Ok(plan)
            }
        }
        deserializer.deserialize_any(PlanVisitor)
    }
}

/// A plan written as a list, as [`LimiterConfig`](crate::LimiterConfig)
/// keeps it beside the plan's first policy (`default_policy`, `tiers`): the
/// first policy's name and the further policies.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PolicyList {
    /// The name of the plan's first policy.
    pub first_name: String,
    /// The policies after the first, in order.
    pub further: Vec<NamedPolicy>,
}

impl PlanPolicies {
    /// The plan's first policy, and the rest of its list when it is one;
    /// `None` for an empty list.
    pub fn split(&self) -> Option<(Policy, Option<PolicyList>)> {
        match self {
            PlanPolicies::One(policy) => Some((*policy, None)),
            PlanPolicies::List(list) => {
                let (first, further) = list.split_first()?;
                let list = PolicyList {
                    first_name: first.name.clone(),
                    further: further.to_vec(),
                };
                Some((first.policy, Some(list)))
            }
        }
    }

    /// The plan of first policy `first` and, when it is a list, the rest of
    /// `list`.
    pub fn join(first: Policy, list: Option<&PolicyList>) -> Self {
        match list {
            None => PlanPolicies::One(first),
            Some(list) => PlanPolicies::List(
                std::iter::once(NamedPolicy {
                    name: list.first_name.clone(),
                    policy: first,
                })
                .chain(list.further.iter().cloned())
                .collect(),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(name: &str, limit: u64, window_s: u64) -> NamedPolicy {
        NamedPolicy {
            name: name.to_owned(),
            policy: Policy::fixed_window(limit, window_s).unwrap(),
        }
    }

    #[test]
    fn a_policy_object_is_the_one_policy_form() {
        let plan: PlanPolicies =
            serde_json::from_str(r#"{"algorithm":"sliding_log","limit":20,"window_s":60}"#)
                .unwrap();
        assert_eq!(
            plan,
            PlanPolicies::One(Policy::sliding_log(20, 60).unwrap())
        );
        assert_eq!(
            serde_json::to_string(&plan).unwrap(),
            r#"{"algorithm":"sliding_log","limit":20,"window_s":60}"#
        );
    }

    #[test]
    fn a_list_reads_and_writes_its_names() {
        let text = r#"[{"name":"second","algorithm":"fixed_window","limit":2,"window_s":1},{"name":"minute","algorithm":"token_bucket","limit":5,"window_s":60,"burst":3}]"#;
        let plan =
            PlanPolicies::from_deserializer(&mut serde_json::Deserializer::from_str(text)).unwrap();
        assert_eq!(
            plan,
            PlanPolicies::List(vec![
                named("second", 2, 1),
                NamedPolicy {
                    name: "minute".to_owned(),
                    policy: Policy::token_bucket(5, 60, 3).unwrap()
                },
            ])
        );
        assert_eq!(serde_json::to_string(&plan).unwrap(), text);
        let (first, list) = plan.split().unwrap();
        assert_eq!(first, Policy::fixed_window(2, 1).unwrap());
        assert_eq!(PlanPolicies::join(first, list.as_ref()), plan);
    }

    #[test]
    fn bad_lists_are_refused_with_the_place() {
        let read = |text: &str| {
            PlanPolicies::from_deserializer(&mut serde_json::Deserializer::from_str(text))
                .unwrap_err()
                .to_string()
        };
        assert!(read("[]").contains("at least one policy"), "{}", read("[]"));
        let twice = r#"[{"name":"a","algorithm":"fixed_window","limit":2,"window_s":1},{"name":"a","algorithm":"fixed_window","limit":3,"window_s":1}]"#;
        assert!(read(twice).contains(r#"policy name "a" is given twice"#));
        let spaced = r#"[{"name":"per second","algorithm":"fixed_window","limit":2,"window_s":1}]"#;
        assert!(
            read(spaced).starts_with("[0]: invalid policy name"),
            "{}",
            read(spaced)
        );
        let unnamed = r#"[{"algorithm":"fixed_window","limit":2,"window_s":1}]"#;
        assert!(
            read(unnamed).contains("missing field `name`"),
            "{}",
            read(unnamed)
        );
        let zero = r#"[{"name":"a","algorithm":"fixed_window","limit":0,"window_s":1}]"#;
        assert!(read(zero).contains("limit must be"), "{}", read(zero));
        assert!(
            read("7").contains("a policy object, or an array"),
            "{}",
            read("7")
        );
    }

    #[test]
    fn names_are_http_tokens() {
        for good in ["day", "per-second", "a.b_c~1", "X"] {
            assert!(check_name(good).is_ok(), "{good}");
        }
        let long = "n".repeat(MAX_POLICY_NAME + 1);
        for bad in ["", "a b", "a\"b", "a,b", "é", "a;b", long.as_str()] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
        let many = PlanPolicies::List(
            (0..=MAX_PLAN_POLICIES)
                .map(|index| named(&format!("p{index}"), 1, 1))
                .collect(),
        );
        assert_eq!(many.validate(), Err(PlanError::TooMany(17)));
    }
}
