//! The plans as the Redis store sees them: the tiers and exempt keys from the
//! configuration, and the default policy shared through Redis (with a
//! generation, bumped by every `configure`, so that keys on the default policy
//! start afresh even when the new policy equals the old).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use arc_swap::ArcSwap;
use redis::{RedisWrite, ToRedisArgs};

use tollgate_core::{
    Algorithm, ApiKey, DEFAULT_TIER, LimiterConfig, NamedPolicy, PlanPolicies, Policy, PolicyError,
    PreparedPolicy, Resolution,
};

use crate::protocol::{
    CALENDAR_WINDOW, COUNTING_FIXED_WINDOW, FIXED_WINDOW, RULE_FIELDS, SLIDING_LOG, TOKEN_BUCKET,
};

/// The most boundaries a calendar window's rule sends: enough for a wait of
/// a year of days.
const MAX_BOUNDARIES: usize = 400;

/// Largest quantity the Lua scripts handle exactly (with room for one sum).
const LUA_EXACT: u128 = 1 << 52;

/// A policy as the scripts take it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ScriptRule {
    pub(crate) policy: Policy,
    /// [`FIXED_WINDOW`], [`COUNTING_FIXED_WINDOW`], [`SLIDING_LOG`],
    /// [`TOKEN_BUCKET`] or [`CALENDAR_WINDOW`].
    pub(crate) algorithm: &'static str,
    pub(crate) limit: u64,
    /// The window in microseconds.
    pub(crate) window: u64,
    pub(crate) burst: u64,
    /// The state's version: states built under another are discarded.
    pub(crate) version: String,
}

impl ScriptRule {
    /// `policy` with the state version `version`.
    ///
    /// # Errors
    ///
    /// [`PolicyError::Unsupported`] when a quantity could leave the range Lua
    /// computes exactly.
    pub(crate) fn new(policy: Policy, version: String) -> Result<Self, PolicyError> {
        check_exact(&policy)?;
        let prepared = PreparedPolicy::compile(policy, Resolution::Microseconds)?;
        Ok(ScriptRule {
            policy,
            algorithm: match policy.algorithm() {
                Algorithm::FixedWindow if policy.calendar_window().is_some() => CALENDAR_WINDOW,
                Algorithm::FixedWindow if policy.counts_refused() => COUNTING_FIXED_WINDOW,
                Algorithm::FixedWindow => FIXED_WINDOW,
                Algorithm::SlidingLog => SLIDING_LOG,
                Algorithm::TokenBucket => TOKEN_BUCKET,
            },
            limit: policy.limit(),
            window: prepared.window_ticks(),
            burst: policy.capacity(),
            version,
        })
    }

    /// What tells this rule from the others of one script call: its state
    /// version and its limit (windows counting refused units of one length
    /// share a version whatever their limits, so that a changed limit keeps
    /// the count).
    pub(crate) fn name(&self) -> (&str, u64) {
        (self.version.as_str(), self.limit)
    }

    /// Whether its limits are charged whatever the request's other limits
    /// decide (and never refunded): a fixed window counting refused units.
    pub(crate) fn counts_refused(&self) -> bool {
        self.algorithm == COUNTING_FIXED_WINDOW
    }

    /// The rule's [`RULE_FIELDS`] arguments for a call at `now` (µs as
    /// text, or [`REDIS_TIME`](crate::protocol::REDIS_TIME)), in the order
    /// the acquire and refund scripts read them: algorithm, limit, window,
    /// burst, version. A calendar window's window is its boundaries around
    /// `now` (see [`ScriptRule::fields_around`]), around this machine's wall
    /// clock for Redis's own time, reaching `horizon` µs past it (the
    /// longest a request of the call may wait: its turn is charged then).
    pub(crate) fn fields(&self, now: &str, horizon: u64) -> [RuleField<'_>; RULE_FIELDS] {
        let around = match self.policy.calendar_window() {
            None => 0,
            Some(_) => now.parse().unwrap_or_else(|_| wall_clock_micros()),
        };
        self.fields_around(around, horizon)
    }

    /// [`ScriptRule::fields`] for a refund at `now` of units counted at
    /// `counted_at` (µs): a calendar window's boundaries reach the period
    /// holding `counted_at`, which a reservation's turn may put periods
    /// after now (the refund script finds the start of the stored period
    /// among them).
    pub(crate) fn fields_reaching(
        &self,
        now: &str,
        counted_at: u64,
    ) -> [RuleField<'_>; RULE_FIELDS] {
        let around = match self.policy.calendar_window() {
            None => 0,
            Some(_) => now.parse().unwrap_or_else(|_| wall_clock_micros()),
        };
        self.fields_around(around, counted_at.saturating_sub(around))
    }

    /// [`ScriptRule::fields`] with a calendar window's boundaries computed
    /// around `around` (µs since the epoch): the start of the period before
    /// the one holding it, that period's start and end, and the end of the
    /// period after it (core's `Calendar::boundaries_around`), then the ends
    /// of the periods after those until one passes `around + horizon` (at
    /// most [`MAX_BOUNDARIES`] in all). The script picks among them by its
    /// own now, or a waiting request's turn, so that a caller whose clock is
    /// less than a period from Redis's decides in the period Redis's clock
    /// is in.
    pub(crate) fn fields_around(&self, around: u64, horizon: u64) -> [RuleField<'_>; RULE_FIELDS] {
        let window = match self.policy.calendar_window() {
            None => RuleField::Number(self.window),
            Some(calendar) => {
                let mut boundaries = calendar.boundaries_around(around, 1_000_000).to_vec();
                let until = around.saturating_add(horizon);
                while let Some(&last) = boundaries.last()
                    && last <= until
                    && last < u64::MAX
                    && boundaries.len() < MAX_BOUNDARIES
                {
                    boundaries.push(calendar.window_at_ticks(last, 1_000_000).1);
                }
                let text: Vec<String> = boundaries.iter().map(u64::to_string).collect();
                RuleField::Owned(text.join(" "))
            }
        };
        [
            RuleField::Text(self.algorithm),
            RuleField::Number(self.limit),
            window,
            RuleField::Number(self.burst),
            RuleField::Text(&self.version),
        ]
    }

    /// The rule of a policy given with a request (a route budget).
    pub(crate) fn for_prepared(prepared: &PreparedPolicy) -> Result<Self, PolicyError> {
        let policy = prepared.policy();
        ScriptRule::new(policy, format!("p{}", canonical(&policy)))
    }
}

/// One of a rule's arguments ([`ScriptRule::fields`]): sent as the text or
/// the number itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum RuleField<'a> {
    Text(&'a str),
    /// A calendar window's boundaries.
    Owned(String),
    Number(u64),
}

/// This machine's wall clock in microseconds since the epoch: where a
/// calendar window's boundaries are computed around when Redis's own clock
/// decides (the two are far less than a period apart).
fn wall_clock_micros() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| {
            u64::try_from(since.as_micros()).unwrap_or(u64::MAX)
        })
}

impl ToRedisArgs for RuleField<'_> {
    fn write_redis_args<W>(&self, out: &mut W)
    where
        W: ?Sized + RedisWrite,
    {
        match self {
            RuleField::Text(text) => text.write_redis_args(out),
            RuleField::Owned(text) => text.write_redis_args(out),
            RuleField::Number(number) => number.write_redis_args(out),
        }
    }
}

/// Whether the scripts compute `policy` exactly: the limit, the burst, the
/// window in microseconds and (token bucket) burst x window below 2^52.
pub(crate) fn check_exact(policy: &Policy) -> Result<(), PolicyError> {
    let window = u128::from(policy.window_s()) * 1_000_000;
    let checks = [
        ("limit", u128::from(policy.limit())),
        ("burst", u128::from(policy.capacity())),
        ("window_s in microseconds", window),
        (
            "burst x window_s in microseconds",
            u128::from(policy.capacity()) * window,
        ),
    ];
    let limit = if policy.algorithm() == Algorithm::TokenBucket {
        4
    } else {
        3
    };
    match checks[..limit]
        .iter()
        .find(|(_, value)| *value >= LUA_EXACT)
    {
        Some((what, _)) => Err(PolicyError::Unsupported(format!(
            "the Redis store computes exactly up to 2^52: {what} is larger"
        ))),
        None => Ok(()),
    }
}

/// A further policy of a plan written as a list: its name (its state's
/// keys are the plan key's with `:NAME` after them) and its rule.
#[derive(Clone, Debug)]
pub(crate) struct FurtherRule {
    pub(crate) name: Arc<str>,
    pub(crate) rule: Arc<ScriptRule>,
}

/// What a plan written as a list has beyond its first rule: the first
/// policy's name and the further rules. Empty for a one-policy plan.
#[derive(Clone, Debug, Default)]
pub(crate) struct PlanList {
    pub(crate) first_name: Option<Arc<str>>,
    pub(crate) further: Arc<[FurtherRule]>,
}

/// The plans in force.
#[derive(Clone, Debug)]
pub(crate) struct Plans {
    pub(crate) default: Arc<ScriptRule>,
    pub(crate) generation: u64,
    pub(crate) tiers: HashMap<Arc<str>, Arc<ScriptRule>>,
    pub(crate) exempt: HashSet<String>,
    /// The default plan's list, when it is one.
    pub(crate) default_list: PlanList,
    /// The lists of the tiers written as lists.
    pub(crate) tier_lists: HashMap<Arc<str>, PlanList>,
    /// Each plan's delay in microseconds (`[limits.tier_defaults.NAME]
    /// delay`), by plan name (`default` or a tier's); none when absent.
    pub(crate) waits: HashMap<Arc<str>, u64>,
}

impl Plans {
    /// The plans of `config`, with `default` (the shared one) as the
    /// default plan under `generation`.
    pub(crate) fn new(
        config: &LimiterConfig,
        default: &PlanPolicies,
        generation: u64,
    ) -> Result<Self, PolicyError> {
        let mut tiers = HashMap::new();
        let mut tier_lists = HashMap::new();
        for name in config.tiers.keys() {
            let Some(plan) = config.plan(name) else {
                continue;
            };
            let named = |error: PolicyError| {
                PolicyError::Unsupported(format!("the policy of tier {name}: {error}"))
            };
            let (first, list) = plan_rules(&plan, |policy| {
                ScriptRule::new(policy, format!("t{}", canonical(&policy))).map_err(named)
            })?;
            let name: Arc<str> = Arc::from(name.as_str());
            if list.first_name.is_some() {
                tier_lists.insert(Arc::clone(&name), list);
            }
            tiers.insert(name, first);
        }
        let (default, default_list) = default_rules(default, generation)?;
        Ok(Plans {
            default,
            generation,
            tiers,
            exempt: config
                .exempt_keys
                .iter()
                .filter_map(|key| ApiKey::parse(key).map(|key| key.as_str().to_owned()))
                .collect(),
            default_list,
            tier_lists,
            waits: config
                .tier_defaults
                .iter()
                .filter(|(_, defaults)| !defaults.delay.is_zero())
                .map(|(plan, defaults)| {
                    let micros = u64::try_from(defaults.delay.as_micros()).unwrap_or(u64::MAX);
                    (Arc::from(plan.as_str()), micros)
                })
                .collect(),
        })
    }

    /// The delay, in microseconds, of a key on `tier`, as
    /// [`Plans::rule_for`] picks its plan (core's `PolicySet::wait_for`).
    pub(crate) fn wait_for(&self, tier: &str) -> u64 {
        let plan = if self.tiers.contains_key(tier) {
            tier
        } else {
            DEFAULT_TIER
        };
        self.waits.get(plan).copied().unwrap_or(0)
    }

    /// The rule of a key on `tier` (`default` or an unknown tier: the default).
    pub(crate) fn rule_for(&self, tier: &str) -> &Arc<ScriptRule> {
        if tier == DEFAULT_TIER {
            return &self.default;
        }
        self.tiers.get(tier).unwrap_or(&self.default)
    }

    /// The list of a key on `tier`, as [`Plans::rule_for`] picks its plan.
    pub(crate) fn list_for(&self, tier: &str) -> &PlanList {
        if tier == DEFAULT_TIER || !self.tiers.contains_key(tier) {
            return &self.default_list;
        }
        static EMPTY: std::sync::OnceLock<PlanList> = std::sync::OnceLock::new();
        self.tier_lists
            .get(tier)
            .unwrap_or_else(|| EMPTY.get_or_init(PlanList::default))
    }

    /// The names of every further policy of every plan, each once: the
    /// state a reset or a change of tier deletes.
    pub(crate) fn further_names(&self) -> Vec<Arc<str>> {
        let mut names: Vec<Arc<str>> = std::iter::once(&self.default_list)
            .chain(self.tier_lists.values())
            .flat_map(|list| list.further.iter().map(|further| Arc::clone(&further.name)))
            .collect();
        names.sort_unstable();
        names.dedup();
        names
    }

    /// The default plan in force, with its names when it is a list.
    pub(crate) fn default_plan(&self) -> PlanPolicies {
        join(&self.default, &self.default_list)
    }

    /// Stores `next(current)` in `plans`, built again on whatever another
    /// writer stores at the same moment (`rcu`), so that neither change is
    /// lost; an `Err` stores nothing.
    pub(crate) fn update(
        plans: &ArcSwap<Plans>,
        mut next: impl FnMut(&Plans) -> Result<Plans, PolicyError>,
    ) -> Result<(), PolicyError> {
        let mut refused = None;
        plans.rcu(|current| match next(current) {
            Ok(next) => {
                refused = None;
                Arc::new(next)
            }
            Err(error) => {
                refused = Some(error);
                Arc::clone(current)
            }
        });
        refused.map_or(Ok(()), Err)
    }

    pub(crate) fn with_default(
        &self,
        default: &PlanPolicies,
        generation: u64,
    ) -> Result<Self, PolicyError> {
        let (default, default_list) = default_rules(default, generation)?;
        Ok(Plans {
            default,
            generation,
            default_list,
            ..self.clone()
        })
    }
}

/// The plan of first rule `first` and list `list`.
fn join(first: &ScriptRule, list: &PlanList) -> PlanPolicies {
    match &list.first_name {
        None => PlanPolicies::One(first.policy),
        Some(name) => PlanPolicies::List(
            std::iter::once(NamedPolicy {
                name: name.to_string(),
                policy: first.policy,
            })
            .chain(list.further.iter().map(|further| NamedPolicy {
                name: further.name.to_string(),
                policy: further.rule.policy,
            }))
            .collect(),
        ),
    }
}

/// `plan`'s first rule and list, each rule made by `rule`.
fn plan_rules(
    plan: &PlanPolicies,
    rule: impl Fn(Policy) -> Result<ScriptRule, PolicyError>,
) -> Result<(Arc<ScriptRule>, PlanList), PolicyError> {
    let mut policies = plan.policies();
    let Some((first_name, first)) = policies.next() else {
        return Err(PolicyError::Malformed(
            "a list of policies needs at least one policy".to_owned(),
        ));
    };
    let further = policies
        .map(|(name, policy)| {
            Ok(FurtherRule {
                name: Arc::from(name.unwrap_or_default()),
                rule: Arc::new(rule(policy)?),
            })
        })
        .collect::<Result<Vec<_>, PolicyError>>()?;
    Ok((
        Arc::new(rule(first)?),
        PlanList {
            first_name: first_name.map(Arc::from),
            further: Arc::from(further),
        },
    ))
}

/// The default plan's rules under `generation` (in every state version, so
/// that a `configure` discards the state of all of them).
fn default_rules(
    plan: &PlanPolicies,
    generation: u64,
) -> Result<(Arc<ScriptRule>, PlanList), PolicyError> {
    plan_rules(plan, |policy| {
        let version = format!("d{generation}.{}", canonical(&policy));
        ScriptRule::new(policy, version)
            .map_err(|error| PolicyError::Unsupported(format!("the default policy: {error}")))
    })
}

/// A policy as text that every build and platform writes the same way, for
/// state versions that gateways of different builds sharing one Redis agree on:
/// `f5.60`, `s20.60`, `t60.60.5` (algorithm, limit, window, burst); `c60` for a
/// window counting refused units, whose count does not depend on its limit.
fn canonical(policy: &Policy) -> String {
    if let Some(calendar) = policy.calendar_window() {
        // The zone by name: every process names it alike.
        return format!(
            "k{}.{}.{}.{}",
            policy.limit(),
            calendar.period(),
            calendar.time_zone(),
            calendar.week_starts()
        );
    }
    match policy.algorithm() {
        // The count means the same under any limit (the core's fingerprint
        // leaves the limit out too): a changed limit keeps the count.
        Algorithm::FixedWindow if policy.counts_refused() => format!("c{}", policy.window_s()),
        Algorithm::FixedWindow => format!("f{}.{}", policy.limit(), policy.window_s()),
        Algorithm::SlidingLog => format!("s{}.{}", policy.limit(), policy.window_s()),
        Algorithm::TokenBucket => {
            format!(
                "t{}.{}.{}",
                policy.limit(),
                policy.window_s(),
                policy.capacity()
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rule_is_sent_as_its_fields() {
        let rule = ScriptRule::new(Policy::token_bucket(60, 60, 5).unwrap(), "v".into()).unwrap();
        let sent = (&rule.fields("0", 0)).to_redis_args();
        assert_eq!(sent.len(), RULE_FIELDS);
        let sent: Vec<&[u8]> = sent.iter().map(Vec::as_slice).collect();
        assert_eq!(sent, [&b"t"[..], b"60", b"60000000", b"5", b"v"]);
    }

    #[test]
    fn a_counting_window_has_its_own_code_and_versions() {
        let counting = Policy::fixed_window_counting_refused(20, 60).unwrap();
        let plain = Policy::fixed_window(20, 60).unwrap();
        assert_eq!(canonical(&counting), "c60");
        let other_limit = Policy::fixed_window_counting_refused(7, 60).unwrap();
        assert_eq!(canonical(&other_limit), "c60");
        assert_eq!(canonical(&plain), "f20.60");
        let rule = ScriptRule::for_prepared(
            &PreparedPolicy::compile(counting, Resolution::Microseconds).unwrap(),
        )
        .unwrap();
        assert_eq!(rule.algorithm, COUNTING_FIXED_WINDOW);
        assert!(rule.counts_refused());
        assert_eq!(rule.version, "pc60");
        assert!(check_exact(&Policy::fixed_window_counting_refused(1 << 52, 1).unwrap()).is_err());
    }

    #[test]
    fn policies_beyond_exact_lua_numbers_are_refused() {
        assert!(check_exact(&Policy::fixed_window(1_000_000, 86_400 * 365).unwrap()).is_ok());
        assert!(check_exact(&Policy::token_bucket(1000, 60, 1_000_000).unwrap()).is_ok());
        let huge_window = Policy::fixed_window(5, 1 << 33).unwrap();
        assert!(
            check_exact(&huge_window)
                .unwrap_err()
                .to_string()
                .contains("window_s")
        );
        let deep_bucket = Policy::token_bucket(1, 3600, 2_000_000_000).unwrap();
        assert!(
            check_exact(&deep_bucket)
                .unwrap_err()
                .to_string()
                .contains("burst x window_s")
        );
        assert!(check_exact(&Policy::sliding_log(1 << 53, 1).unwrap()).is_err());
    }

    #[test]
    fn a_policy_out_of_range_is_named_by_its_tier() {
        let deep_bucket = Policy::token_bucket(1, 3600, 2_000_000_000).unwrap();
        let mut config = LimiterConfig::default();
        config.tiers.insert("gold".to_owned(), deep_bucket);
        let error = Plans::new(&config, &config.default_plan(), 0).unwrap_err();
        assert_eq!(
            error.to_string(),
            "the policy of tier gold: the Redis store computes exactly up to 2^52: \
             burst x window_s in microseconds is larger"
        );
        let error = Plans::new(
            &LimiterConfig::default(),
            &PlanPolicies::One(deep_bucket),
            0,
        )
        .unwrap_err();
        assert!(
            error.to_string().starts_with("the default policy: "),
            "{error}"
        );
    }
}
