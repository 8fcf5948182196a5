//! The limiter's configuration: default policy, tiers, exempt keys, idle
//! eviction and the cap on tracked keys; its TOML form and the built-in defaults.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::key::ApiKey;
use crate::plan::{PlanError, PlanPolicies, PolicyList};
use crate::policy::{Policy, PolicyError};
use crate::tier_defaults::{MAX_DELAY, MAX_IN_FLIGHT, TierDefaults};
pub use crate::toml_text::{describe_toml_error, parse_toml, parse_toml_with};

/// The name that always means "the default policy" in [`Limiter::assign_tier`];
/// no configured tier may take it.
///
/// [`Limiter::assign_tier`]: crate::Limiter::assign_tier
pub const DEFAULT_TIER: &str = "default";

/// The idle eviction age of the built-in defaults: 3600 s.
pub const DEFAULT_IDLE_EVICTION_S: u64 = 3600;

/// The cap on tracked keys of the built-in defaults: 1,000,000 keys.
pub const DEFAULT_MAX_TRACKED_KEYS: usize = 1_000_000;

/// How a [`Limiter`](crate::Limiter) limits keys.
///
/// In a configuration file, it is the `[limits]` table (the one layout of
/// `tollgate serve` and `tollgate run --config`; see `docs/CONFIG.md`). Every
/// field is optional; an absent `default_policy`, `idle_eviction_s` or
/// `max_tracked_keys` takes the built-in value, absent `tiers` and
/// `exempt_keys` mean none:
///
/// ```toml
/// [limits]
/// idle_eviction_s = 3600        # seconds without a request before a key's state is dropped
/// max_tracked_keys = 1000000    # keys holding state at once; a least recently used one goes first
/// exempt_keys = ["sk_internal"] # never limited
///
/// [limits.default_policy]
/// algorithm = "fixed_window"
/// limit = 5
/// window_s = 60
///
/// [limits.tiers.pro]
/// algorithm = "sliding_log"
/// limit = 20
/// window_s = 60
///
/// # A plan held to several policies at once: an array of tables, each
/// # with a name (see [`PlanPolicies`]).
/// [[limits.tiers.team]]
/// name = "second"
/// algorithm = "fixed_window"
/// limit = 10
/// window_s = 1
///
/// [[limits.tiers.team]]
/// name = "day"
/// algorithm = "fixed_window"
/// limit = 10000
/// window_s = 86400
/// ```
///
/// A plan written as a list keeps its first policy where the one-policy
/// form keeps its policy (`default_policy`, `tiers`), and its names and
/// further policies in `policy_lists`; [`LimiterConfig::plan`] gives it
/// whole.
///
/// [`LimiterConfig::from_toml_str`] reads the table's content, the same
/// settings without `limits.`.
///
/// [`LimiterConfig::default`] is the contract's built-in table: fixed window 5
/// per 60 s, tier `pro` sliding log 20 per 60 s, tier `enterprise` fixed window
/// 1000 per 60 s, exempt `sk_internal`, eviction after 3600 s.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "LimitsTable", into = "LimitsTable")]
pub struct LimiterConfig {
    /// The policy of every key without a tier (or on tier `default`); the
    /// first policy when the default plan is a list.
    pub default_policy: Policy,
    /// Named plans that keys are assigned to: each one's policy, or the
    /// first of its list.
    pub tiers: BTreeMap<String, Policy>,
    /// The plans written as lists, by plan (`default` or a tier's name):
    /// the first policy's name and the further policies. A plan absent here
    /// is held to its one policy.
    pub policy_lists: BTreeMap<String, PolicyList>,
    /// Keys never limited and never tracked. Parsed like any API key
    /// (`"Bearer x"` means `x`).
    pub exempt_keys: Vec<String>,
    /// Seconds without a request after which a key's limiter state is dropped,
    /// from 1 to 2^63-1.
    pub idle_eviction_s: u64,
    /// The most keys holding limiter state at once, at least 1. When full, a
    /// new key pushes out the least recently used key of its shard (one of
    /// 64, an approximation of the least recently used overall), which starts
    /// afresh when it returns: a key pushed out early may get more than its
    /// limit. See [`Limiter`](crate::Limiter) for the exact bound.
    pub max_tracked_keys: usize,
    /// Each plan's settings besides its policies (`default` or a tier's
    /// name): its delay and its concurrency limit, defaults a route's own
    /// settings override. A plan absent here has neither.
    pub tier_defaults: BTreeMap<String, TierDefaults>,
}

/// The `[limits]` table as written: each plan in either form.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct LimitsTable {
    #[serde(default = "builtin_default_plan")]
    default_policy: PlanPolicies,
    #[serde(default)]
    tiers: BTreeMap<String, PlanPolicies>,
    #[serde(default)]
    exempt_keys: Vec<String>,
    #[serde(default = "builtin_idle_eviction_s")]
    idle_eviction_s: u64,
    #[serde(default = "builtin_max_tracked_keys")]
    max_tracked_keys: usize,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    tier_defaults: BTreeMap<String, TierDefaults>,
}

impl TryFrom<LimitsTable> for LimiterConfig {
    type Error = String;

    fn try_from(table: LimitsTable) -> Result<Self, String> {
        let empty = |name: &str| format!("invalid {name}: {}", PlanError::Empty);
        let mut policy_lists = BTreeMap::new();
        let (default_policy, list) = table
            .default_policy
            .split()
            .ok_or_else(|| empty("default_policy"))?;
        if let Some(list) = list {
            policy_lists.insert(DEFAULT_TIER.to_owned(), list);
        }
        let mut tiers = BTreeMap::new();
        for (name, plan) in table.tiers {
            let (first, list) = plan
                .split()
                .ok_or_else(|| empty(&format!("tiers.{name}")))?;
            if let Some(list) = list {
                policy_lists.insert(name.clone(), list);
            }
            tiers.insert(name, first);
        }
        Ok(LimiterConfig {
            default_policy,
            tiers,
            policy_lists,
            exempt_keys: table.exempt_keys,
            idle_eviction_s: table.idle_eviction_s,
            max_tracked_keys: table.max_tracked_keys,
            tier_defaults: table.tier_defaults,
        })
    }
}

impl From<LimiterConfig> for LimitsTable {
    fn from(config: LimiterConfig) -> Self {
        LimitsTable {
            default_policy: config.default_plan(),
            tiers: config
                .tiers
                .keys()
                .filter_map(|name| Some((name.clone(), config.plan(name)?)))
                .collect(),
            exempt_keys: config.exempt_keys,
            idle_eviction_s: config.idle_eviction_s,
            max_tracked_keys: config.max_tracked_keys,
            tier_defaults: config.tier_defaults,
        }
    }
}

impl std::fmt::Debug for LimiterConfig {
    /// Exempt keys are counted, never shown.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LimiterConfig")
            .field("default_policy", &self.default_policy)
            .field("tiers", &self.tiers)
            .field("policy_lists", &self.policy_lists)
            .field("exempt_keys", &self.exempt_keys.len())
            .field("idle_eviction_s", &self.idle_eviction_s)
            .field("max_tracked_keys", &self.max_tracked_keys)
            .field("tier_defaults", &self.tier_defaults)
            .finish()
    }
}

/// Why a configuration is invalid.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The TOML text does not parse or has the wrong shape: one line naming the
    /// line, the column and the problem.
    #[error("invalid configuration: {0}")]
    Toml(String),
    /// A policy is invalid.
    #[error("invalid {name}: {reason}")]
    Policy {
        /// `default_policy` or `tiers.NAME`.
        name: String,
        /// What is wrong with it.
        reason: PolicyError,
    },
    /// A plan's list of policies is invalid.
    #[error("invalid {plan}: {reason}")]
    PlanPolicies {
        /// `default_policy` or `tiers.NAME`.
        plan: String,
        /// What is wrong with it.
        reason: PlanError,
    },
    /// `policy_lists` names a plan that is neither `default` nor a tier.
    #[error("a list of policies is given for {0:?}, which is neither `default` nor a tier")]
    ListOfUnknownPlan(String),
    /// A tier name is empty or `default`.
    #[error("invalid tier name {0:?}: tier names are non-empty and `default` is reserved")]
    TierName(String),
    /// An exempt key is empty once parsed.
    #[error("invalid exempt key at position {0}: an exempt key must not be empty")]
    ExemptKey(usize),
    /// `idle_eviction_s` is 0 or above 2^63-1.
    #[error("idle_eviction_s must be from 1 to 2^63-1, got {0}")]
    IdleEviction(u64),
    /// `max_tracked_keys` is 0.
    #[error("max_tracked_keys must be at least 1")]
    MaxTrackedKeys,
    /// A plan's `tier_defaults` are invalid.
    #[error("invalid tier_defaults.{tier}: {reason}")]
    TierDefaults {
        /// The plan: `default` or a tier's name.
        tier: String,
        /// What is wrong.
        reason: String,
    },
}

impl LimiterConfig {
    /// Parses and validates a TOML document holding the settings of a
    /// `[limits]` table at its top level.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] naming the first problem found.
    pub fn from_toml_str(text: &str) -> Result<Self, ConfigError> {
        let config: LimiterConfig = parse_toml(text).map_err(ConfigError::Toml)?;
        config.validate()?;
        Ok(config)
    }

    /// Checks what the types alone cannot: tier names, exempt keys, ranges.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] naming the first problem found.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if let Some(name) = self
            .tiers
            .keys()
            .find(|name| name.is_empty() || name.as_str() == DEFAULT_TIER)
        {
            return Err(ConfigError::TierName(name.clone()));
        }
        for plan in self.policy_lists.keys() {
            let setting = if plan == DEFAULT_TIER {
                "default_policy".to_owned()
            } else if self.tiers.contains_key(plan) {
                format!("tiers.{plan}")
            } else {
                return Err(ConfigError::ListOfUnknownPlan(plan.clone()));
            };
            if let Some(plan) = self.plan(plan) {
                plan.validate()
                    .map_err(|reason| ConfigError::PlanPolicies {
                        plan: setting,
                        reason,
                    })?;
            }
        }
        if let Some(position) = self
            .exempt_keys
            .iter()
            .position(|key| ApiKey::parse(key).is_none())
        {
            return Err(ConfigError::ExemptKey(position));
        }
        if !(1..=crate::MAX_VALUE).contains(&self.idle_eviction_s) {
            return Err(ConfigError::IdleEviction(self.idle_eviction_s));
        }
        if self.max_tracked_keys == 0 {
            return Err(ConfigError::MaxTrackedKeys);
        }
        validate_tier_defaults(self, &self.tier_defaults)
    }
}

impl LimiterConfig {
    /// The policies of plan `name` (`default`, or a tier's name); `None` for
    /// a tier that is not configured.
    pub fn plan(&self, name: &str) -> Option<PlanPolicies> {
        let first = if name == DEFAULT_TIER {
            self.default_policy
        } else {
            *self.tiers.get(name)?
        };
        Some(PlanPolicies::join(first, self.policy_lists.get(name)))
    }

    /// The default plan's policies.
    pub fn default_plan(&self) -> PlanPolicies {
        PlanPolicies::join(self.default_policy, self.policy_lists.get(DEFAULT_TIER))
    }

    /// Sets plan `name` (`default`, or a tier's name, added when new) to
    /// `plan`: its first policy where the one-policy form goes, the rest of
    /// a list in `policy_lists`. An empty list changes nothing (and is
    /// what [`LimiterConfig::validate`] would refuse).
    pub fn set_plan(&mut self, name: &str, plan: &PlanPolicies) {
        let Some((first, list)) = plan.split() else {
            return;
        };
        if name == DEFAULT_TIER {
            self.default_policy = first;
        } else {
            self.tiers.insert(name.to_owned(), first);
        }
        match list {
            Some(list) => self.policy_lists.insert(name.to_owned(), list),
            None => self.policy_lists.remove(name),
        };
    }
}

impl LimiterConfig {
    /// The delay of the tier named `tier`, as [`MaxWait::TierDelay`](crate::MaxWait::TierDelay) takes
    /// it: a configured tier's own (zero without one); the default plan's
    /// for `None`, `default`, and a tier that is not configured (held to
    /// the default plan, so it takes the default plan's delay too).
    pub fn tier_delay(&self, tier: Option<&str>) -> Duration {
        self.tier_defaults_of(tier).delay
    }

    /// The [`TierDefaults`] that apply to a key on `tier`, as
    /// [`LimiterConfig::tier_delay`] finds them.
    pub fn tier_defaults_of(&self, tier: Option<&str>) -> TierDefaults {
        let tier = tier.filter(|tier| self.tiers.contains_key(*tier));
        self.tier_defaults
            .get(tier.unwrap_or(DEFAULT_TIER))
            .copied()
            .unwrap_or_default()
    }

    /// Whether any plan lets its requests wait ([`TierDefaults::delay`]).
    pub fn any_tier_delay(&self) -> bool {
        self.tier_defaults
            .values()
            .any(|defaults| !defaults.delay.is_zero())
    }
}

/// Checks `tier_defaults` against the rest of `config`: each name a tier
/// or `default`, each delay at most [`MAX_DELAY`] and `idle_eviction_s`,
/// each `max_in_flight` 1 to 2^32.
pub(crate) fn validate_tier_defaults(
    config: &LimiterConfig,
    tier_defaults: &BTreeMap<String, TierDefaults>,
) -> Result<(), ConfigError> {
    for (tier, defaults) in tier_defaults {
        let invalid = |reason: String| ConfigError::TierDefaults {
            tier: tier.clone(),
            reason,
        };
        if tier != DEFAULT_TIER && !config.tiers.contains_key(tier) {
            return Err(invalid(
                "there is no such tier in limits.tiers (`default` is the default plan)".into(),
            ));
        }
        if defaults.delay > MAX_DELAY {
            return Err(invalid(format!(
                "delay must be at most {}, how long a request may wait for its turn",
                humantime::format_duration(MAX_DELAY)
            )));
        }
        if defaults.delay > Duration::from_secs(config.idle_eviction_s) {
            return Err(invalid(format!(
                "delay must be at most idle_eviction_s ({} s): a key idle that long \
                 would lose the turns its requests wait for",
                config.idle_eviction_s
            )));
        }
        if defaults
            .max_in_flight
            .is_some_and(|max| !(1..=MAX_IN_FLIGHT).contains(&max))
        {
            return Err(invalid(format!(
                "max_in_flight must be 1 to {MAX_IN_FLIGHT} (2^32), the requests of one key in flight at once"
            )));
        }
    }
    Ok(())
}

impl Default for LimiterConfig {
    fn default() -> Self {
        LimiterConfig {
            default_policy: builtin_default_policy(),
            tiers: BTreeMap::from([
                (
                    "pro".to_owned(),
                    Policy::sliding_log(20, 60).expect("20 per 60 s is a valid policy"),
                ),
                (
                    "enterprise".to_owned(),
                    Policy::fixed_window(1000, 60).expect("1000 per 60 s is a valid policy"),
                ),
            ]),
            policy_lists: BTreeMap::new(),
            exempt_keys: vec!["sk_internal".to_owned()],
            idle_eviction_s: DEFAULT_IDLE_EVICTION_S,
            max_tracked_keys: DEFAULT_MAX_TRACKED_KEYS,
            tier_defaults: BTreeMap::new(),
        }
    }
}

/// Fixed window, 5 requests per 60 s.
fn builtin_default_policy() -> Policy {
    Policy::fixed_window(5, 60).expect("5 per 60 s is a valid policy")
}

fn builtin_default_plan() -> PlanPolicies {
    PlanPolicies::One(builtin_default_policy())
}

fn builtin_idle_eviction_s() -> u64 {
    DEFAULT_IDLE_EVICTION_S
}

fn builtin_max_tracked_keys() -> usize {
    DEFAULT_MAX_TRACKED_KEYS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_toml_error_names_the_line_and_never_shows_a_value() {
        #[derive(Debug, serde::Deserialize)]
        #[allow(dead_code)]
        struct Settings {
            token: Option<String>,
            exempt_keys: Option<Vec<String>>,
        }
        let described = |text: &str| parse_toml::<Settings>(text).unwrap_err();
        // A syntax error after a secret on the same line.
        let text = "# admin\ntoken = \"s3cret-admin-token\" x\n";
        let message = described(text);
        assert!(message.starts_with("line 2, column 30: "), "{message}");
        assert!(!message.contains("s3cret"), "{message}");
        // Inside an array over several lines.
        let message = described("exempt_keys = [\n  \"sk_secret\" \"sk_other\",\n]\n");
        assert!(message.starts_with("line 2, column "), "{message}");
        assert!(!message.contains("sk_"), "{message}");
        // A value of the wrong type, which serde would quote.
        let message = described("exempt_keys = \"sk_internal\"\n");
        assert_eq!(
            message,
            "line 1, column 15 (`exempt_keys`): invalid type: string, expected a sequence"
        );
        let message = described("token = 123456789\n");
        assert_eq!(
            message,
            "line 1, column 9 (`token`): invalid type: integer, expected a string"
        );
    }

    #[test]
    fn builtin_defaults_are_the_contract_table() {
        let config = LimiterConfig::default();
        assert_eq!(config.default_policy, Policy::fixed_window(5, 60).unwrap());
        assert_eq!(config.tiers["pro"], Policy::sliding_log(20, 60).unwrap());
        assert_eq!(
            config.tiers["enterprise"],
            Policy::fixed_window(1000, 60).unwrap()
        );
        assert_eq!(config.exempt_keys, ["sk_internal"]);
        assert_eq!(config.idle_eviction_s, 3600);
        config.validate().unwrap();
    }

    #[test]
    fn absent_fields_take_builtin_values_but_no_tiers_or_exempt_keys() {
        let config = LimiterConfig::from_toml_str("").unwrap();
        assert_eq!(config.default_policy, Policy::fixed_window(5, 60).unwrap());
        assert!(config.tiers.is_empty());
        assert!(config.exempt_keys.is_empty());
        assert_eq!(config.max_tracked_keys, 1_000_000);
    }

    #[test]
    fn parses_a_full_file() {
        let config = LimiterConfig::from_toml_str(
            r#"
            idle_eviction_s = 60
            max_tracked_keys = 10
            exempt_keys = ["Bearer sk_ops"]
            [default_policy]
            algorithm = "token_bucket"
            limit = 7
            window_s = 60
            [tiers.gold]
            algorithm = "sliding_log"
            limit = 100
            window_s = 1
            "#,
        )
        .unwrap();
        assert_eq!(
            config.default_policy,
            Policy::token_bucket(7, 60, 7).unwrap()
        );
        assert_eq!(config.tiers["gold"], Policy::sliding_log(100, 1).unwrap());
        assert_eq!(config.idle_eviction_s, 60);
    }

    #[test]
    fn rejects_bad_files_with_the_reason() {
        let cases = [
            (
                "[tiers.default]\nalgorithm = \"fixed_window\"\nlimit = 1\nwindow_s = 1",
                "reserved",
            ),
            ("exempt_keys = [\"  \"]", "exempt key"),
            ("idle_eviction_s = 0", "idle_eviction_s"),
            ("max_tracked_keys = 0", "max_tracked_keys"),
            (
                "[default_policy]\nalgorithm = \"fixed_window\"\nlimit = 0\nwindow_s = 1",
                "limit",
            ),
            (
                "[default_policy]\nalgorithm = \"fixed_window\"\nlimit = 1\nwindow_s = 1\nburst = 3",
                "burst",
            ),
            ("colour = \"blue\"", "colour"),
        ];
        for (text, reason) in cases {
            let error = LimiterConfig::from_toml_str(text).unwrap_err().to_string();
            assert!(error.contains(reason), "{text:?} gave {error:?}");
        }
    }
}
