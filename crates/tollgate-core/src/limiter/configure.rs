//! Putting policies in force: compiling a configuration's plans for the
//! limiter's clock with their versions ([`Limiter::reconfigure`]), and
//! replacing the default plan ([`Limiter::configure`],
//! [`Limiter::configure_plan`]).

use super::*;

impl Limiter {
    /// Replaces the default policy and drops the state of every key on it, even
    /// when the new policy equals the old. Keys on tiers keep their state.
    /// Returns the policy now in force.
    ///
    /// Each shard switches under its own lock, so every decision sees either the
    /// old policy with the old state or the new policy with fresh state.
    ///
    /// # Errors
    ///
    /// [`PolicyError::WindowTooLong`] when the window does not fit the limiter's
    /// resolution; nothing changes then.
    pub fn configure(&self, policy: Policy) -> Result<Policy, PolicyError> {
        self.configure_plan(&PlanPolicies::One(policy))
            .map(|_| policy)
    }

    /// Replaces the default plan by `plan` (one policy, or a list of named
    /// policies) and drops the state of every key on it, of every one of its
    /// policies, even when the new plan equals the old (as
    /// [`Limiter::configure`]). Keys on tiers keep their state. Returns the
    /// plan now in force.
    ///
    /// # Errors
    ///
    /// [`PolicyError::Malformed`] for a list [`PlanPolicies::validate`]
    /// refuses, [`PolicyError::WindowTooLong`] when a window does not fit the
    /// limiter's resolution; nothing changes then.
    pub fn configure_plan(&self, plan: &PlanPolicies) -> Result<PlanPolicies, PolicyError> {
        plan.validate()
            .map_err(|error| PolicyError::Malformed(error.to_string()))?;
        let default = compile_plan(
            "default_policy",
            plan,
            None,
            self.resolution,
            &self.next_version,
        )
        .map_err(|error| match error {
            ConfigError::Policy { reason, .. } => reason,
            other => PolicyError::Malformed(other.to_string()),
        })?;
        let mut policies = self.policies.lock();
        let mut next = PolicySet::clone(&policies);
        next.default = default;
        next.has_lists = has_lists(&next);
        let next = Arc::new(next);
        for shard in self.shards.iter() {
            shard
                .lock()
                .replace_policies(Arc::clone(&next), &self.hasher);
        }
        *policies = next;
        drop(policies);
        // Its keys keep their state as long as its policies count.
        if let Some((first, list)) = plan.clone().split() {
            let further = list.map(|list| list.further).unwrap_or_default();
            let longest = further
                .iter()
                .map(|named| named.policy.counted_span_s())
                .fold(first.counted_span_s(), u64::max);
            self.keep_state_for(longest);
        }
        Ok(plan.clone())
    }

    /// The default plan in force: its policies, with their names when it is
    /// a list.
    pub fn default_plan(&self) -> PlanPolicies {
        plan_policies(&self.policies.lock().default)
    }

    /// Puts a whole new configuration in force (a reload): default policy,
    /// tiers, exempt keys, idle eviction and key cap. Keys whose rule is
    /// unchanged keep their state; keys whose rule changed or disappeared start
    /// afresh; tier assignments stay (an assignment to a tier no longer
    /// configured falls back to the default policy).
    ///
    /// In a plan written as a list, the first policy keeps its state while
    /// it is unchanged (whatever its name, as a one-policy plan's), and each
    /// further policy while a further policy of the same name and rule
    /// remains; a policy that moves into or out of first place starts afresh.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] when the configuration is invalid; nothing changes then.
    pub fn reconfigure(&self, config: &LimiterConfig) -> Result<(), ConfigError> {
        config.validate()?;
        let mut policies = self.policies.lock();
        let next = Arc::new(compile_policies(
            config,
            Some(&policies),
            self.resolution,
            &self.next_version,
            &self.hasher,
        )?);
        let configured = idle_ticks(config, self.resolution);
        self.count.set_cap(config.max_tracked_keys);
        for shard in self.shards.iter() {
            let mut shard = shard.lock();
            shard.replace_policies(Arc::clone(&next), &self.hasher);
            // Read under the shard's lock: a policy prepared meanwhile is
            // seen here, or raises this shard after (`keep_state_for`).
            let prepared = self
                .resolution
                .ticks_from_seconds(self.prepared_whole_after_s.load(Ordering::Relaxed))
                .unwrap_or(u64::MAX);
            shard.set_idle_after(configured.max(prepared));
        }
        // A lower cap: drop least recently used keys evenly across the shards.
        let mut shed = true;
        while shed {
            shed = false;
            for shard in self.shards.iter() {
                shed |= shard.lock().shed_one();
            }
        }
        *policies = next;
        Ok(())
    }
}

/// The policies of `config` compiled for `resolution`, keeping the versions
/// of `current`'s rules that do not change (see [`Limiter::reconfigure`]).
pub(super) fn compile_policies(
    config: &LimiterConfig,
    current: Option<&PolicySet>,
    resolution: Resolution,
    next_version: &AtomicU64,
    hasher: &RandomState,
) -> Result<PolicySet, ConfigError> {
    let default = compile_plan(
        "default_policy",
        &config.default_plan(),
        current.map(|current| &current.default),
        resolution,
        next_version,
    )?;
    let mut tiers = HashMap::with_capacity(config.tiers.len());
    for name in config.tiers.keys() {
        let Some(plan) = config.plan(name) else {
            continue;
        };
        let current = current.and_then(|current| current.tiers.get(name.as_str()));
        let rules = compile_plan(
            &format!("tiers.{name}"),
            &plan,
            current,
            resolution,
            next_version,
        )?;
        tiers.insert(Arc::from(name.as_str()), rules);
    }
    let mut set = PolicySet {
        default,
        tiers: Arc::new(tiers),
        exempt: Arc::new(policy_set::exempt_table(&config.exempt_keys, hasher)),
        has_lists: false,
        waits: Arc::new(
            config
                .tier_defaults
                .iter()
                .filter(|(_, defaults)| !defaults.delay.is_zero())
                .map(|(plan, defaults)| {
                    (
                        Arc::from(plan.as_str()),
                        resolution.ticks_from_duration(defaults.delay),
                    )
                })
                .collect(),
        ),
    };
    set.has_lists = has_lists(&set);
    Ok(set)
}

/// Whether any plan of `set` has further rules.
fn has_lists(set: &PolicySet) -> bool {
    !set.default.further.is_empty() || set.tiers.values().any(|plan| !plan.further.is_empty())
}

/// `plan` (named `setting` in errors) compiled for `resolution`. A rule of
/// `current` whose policy is unchanged keeps its version (so its keys keep
/// their state): the first policy whatever its name, a further one when its
/// name is unchanged too.
fn compile_plan(
    setting: &str,
    plan: &PlanPolicies,
    current: Option<&PlanRules>,
    resolution: Resolution,
    next_version: &AtomicU64,
) -> Result<PlanRules, ConfigError> {
    let compile = |name: String, policy: Policy, kept: Option<VersionedRule>| match kept {
        Some(rule) if rule.rule.policy == policy => Ok(rule),
        _ => Rule::compile(policy, resolution)
            .map(|rule| VersionedRule {
                rule,
                version: next_version.fetch_add(1, Ordering::Relaxed),
            })
            .map_err(|reason| ConfigError::Policy { name, reason }),
    };
    let mut policies = plan.policies();
    let Some((first_name, first)) = policies.next() else {
        return Err(ConfigError::PlanPolicies {
            plan: setting.to_owned(),
            reason: crate::plan::PlanError::Empty,
        });
    };
    let first = compile(
        setting.to_owned(),
        first,
        current.map(|current| current.first),
    )?;
    let further = policies
        .map(|(name, policy)| {
            let name = name.unwrap_or_default();
            let kept = current.and_then(|current| {
                current
                    .further
                    .iter()
                    .find(|named| &*named.name == name)
                    .map(|named| named.rule)
            });
            compile(format!("{setting} (policy {name})"), policy, kept).map(|rule| NamedRule {
                name: Arc::from(name),
                rule,
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(PlanRules {
        first,
        first_name: first_name.map(Arc::from),
        further: Arc::from(further),
    })
}

/// The policies of `plan`, with their names when it is a list.
fn plan_policies(plan: &PlanRules) -> PlanPolicies {
    let first = plan.first.rule.policy;
    match &plan.first_name {
        None => PlanPolicies::One(first),
        Some(name) => PlanPolicies::List(
            std::iter::once(NamedPolicy {
                name: name.to_string(),
                policy: first,
            })
            .chain(plan.further.iter().map(|named| NamedPolicy {
                name: named.name.to_string(),
                policy: named.rule.rule.policy,
            }))
            .collect(),
        ),
    }
}

/// The idle eviction age in ticks that `config` asks for:
/// `idle_eviction_s`, or longer where one of its policies keeps its state
/// longer (the longest [`Policy::counted_span_s`]): a key's state is never
/// dropped before it is whole again. Policies prepared since raise it
/// further ([`Limiter::keep_state_for`]).
pub(super) fn idle_ticks(config: &LimiterConfig, resolution: Resolution) -> u64 {
    let plans = std::iter::once(&config.default_policy)
        .chain(config.tiers.values())
        .chain(
            config
                .policy_lists
                .values()
                .flat_map(|list| list.further.iter().map(|named| &named.policy)),
        );
    let longest = plans
        .map(Policy::counted_span_s)
        .fold(config.idle_eviction_s, u64::max);
    resolution.ticks_from_seconds(longest).unwrap_or(u64::MAX)
}

impl Limiter {
    /// Keeps every key's state at least `whole_after_s` seconds after its
    /// last request (a policy prepared for [`Limit::Policy`], or a default
    /// plan put in force by [`Limiter::configure_plan`]), raising the idle
    /// eviction age when it is longer. It only grows: a
    /// [`Limiter::reconfigure`] keeps the longest of these too.
    pub(super) fn keep_state_for(&self, whole_after_s: u64) {
        let before = self
            .prepared_whole_after_s
            .fetch_max(whole_after_s, Ordering::Relaxed);
        if whole_after_s <= before {
            return;
        }
        let ticks = self
            .resolution
            .ticks_from_seconds(whole_after_s)
            .unwrap_or(u64::MAX);
        for shard in self.shards.iter() {
            shard.lock().raise_idle_after(ticks);
        }
    }
}
