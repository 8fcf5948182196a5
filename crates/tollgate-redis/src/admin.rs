//! The store's admin operations: `configure` (the shared default policy,
//! through `lua/configure.lua`, then a message on the channel
//! `PREFIX:config`), `assign_tier` and `reset` (through `lua/admin.lua`:
//! this module is the Rust twin of both scripts) and `inspect` (a key's tier
//! and its state, read by the acquire script without writing).

use std::sync::Arc;
use std::time::Duration;

use redis::AsyncCommands;
use tollgate_core::{
    Decision, KeyReport, PlanPolicies, Policy, PolicyError, PolicyReport, StoreError, UnknownTier,
};

use crate::call::{self, Reply, Request, ScriptLimit};
use crate::context::Context;
use crate::keys::{KeyNames, Space, config_key};
use crate::plans::{Plans, check_exact};
use crate::protocol::{ADMIN_DONE, ADMIN_NOTHING, ADMIN_RESET, ADMIN_TIER, DEFAULT_TIER};

/// Makes `policy` the default policy of every gateway; see
/// [`configure_plan`].
pub(crate) async fn configure(context: &Context, policy: Policy) -> Result<Policy, StoreError> {
    configure_plan(context, PlanPolicies::One(policy))
        .await
        .map(|_| policy)
}

/// Makes `plan` (one policy, or a list of named policies) the default plan
/// of every gateway: stores it as JSON with a new generation (which
/// discards the state of every default-plan policy lazily), puts it in force
/// here, and tells the others on the channel.
pub(crate) async fn configure_plan(
    context: &Context,
    plan: PlanPolicies,
) -> Result<PlanPolicies, StoreError> {
    plan.validate()
        .map_err(|error| StoreError::Policy(PolicyError::Malformed(error.to_string())))?;
    for (_, policy) in plan.policies() {
        check_exact(&policy)?;
    }
    let json =
        serde_json::to_string(&plan).map_err(|error| StoreError::Unavailable(error.to_string()))?;
    let key = config_key(&context.prefix);
    let mut connection = context.connection.clone();
    let generation: u64 = context
        .timed(
            context
                .configure
                .key(&key)
                .arg(&json)
                .invoke_async(&mut connection),
        )
        .await?;
    // Tiers a reload stores at the same moment are kept. (A read of the older
    // policy the sync task stores just after is put right by the message
    // published below.)
    Plans::update(&context.plans, |current| {
        current.with_default(&plan, generation)
    })?;
    let _: Result<i64, _> = context.timed(connection.publish(&key, generation)).await;
    Ok(plan)
}

/// Puts `key`'s plan on `tier` (a configured tier or the default); a change
/// of tier starts its state afresh.
pub(crate) async fn assign_tier(
    context: &Context,
    key: &str,
    tier: &str,
) -> Result<(), StoreError> {
    if tier != DEFAULT_TIER && !context.plans.load().tiers.contains_key(tier) {
        return Err(StoreError::UnknownTier(UnknownTier(tier.to_owned())));
    }
    let names = context.names(Space::Plan, key);
    admin_call(context, &names, &[ADMIN_TIER, tier]).await?;
    context.remember_tier(&names.tier, Arc::from(tier));
    Ok(())
}

/// Drops `key`'s state; whether there was any.
pub(crate) async fn reset(context: &Context, key: &str) -> Result<bool, StoreError> {
    let names = context.names(Space::Plan, key);
    let done = admin_call(context, &names, &[ADMIN_RESET]).await?;
    debug_assert!(
        done == ADMIN_DONE || done == ADMIN_NOTHING,
        "the admin script answered {done}"
    );
    Ok(done == ADMIN_DONE)
}

/// Runs the admin script on the keys `names` with `command`.
async fn admin_call(
    context: &Context,
    names: &KeyNames,
    command: &[&str],
) -> Result<i64, StoreError> {
    let mut invocation = context.admin.prepare_invoke();
    invocation
        .key(&names.state)
        .key(&names.log)
        .key(&names.tier);
    // The further policies' state of every plan written as a list.
    for name in context.plans.load().further_names() {
        let further = names.further(&name);
        invocation.key(further.state).key(further.log);
    }
    for argument in command {
        invocation.arg(*argument);
    }
    let mut connection = context.connection.clone();
    context
        .timed(invocation.invoke_async(&mut connection))
        .await
}

/// `key`'s tier, policy and state (what it has left now, on the store's
/// time), read without writing.
pub(crate) async fn inspect(context: &Context, key: &str) -> Result<KeyReport, StoreError> {
    let plans = context.plans.load_full();
    if plans.exempt.contains(key) {
        return Ok(KeyReport {
            tier: tier_of(context, key).await?,
            policy: None,
            state: Some(Decision::exempt(0)),
            policy_name: None,
            further: Vec::new(),
        });
    }
    let names = context.names(Space::Plan, key);
    let mut connection = context.connection.clone();
    let (tier, exists): (Option<String>, bool) = context
        .timed(
            redis::pipe()
                .get(&names.tier)
                .exists(&names.state)
                .query_async(&mut connection),
        )
        .await?;
    let tier = tier
        .filter(|tier| !tier.is_empty())
        .unwrap_or_else(|| DEFAULT_TIER.to_owned());
    let rule = plans.rule_for(&tier).clone();
    let names_of_plan = Arc::new(names);
    let state = if exists {
        let limit = ScriptLimit::plan(
            Arc::clone(&names_of_plan),
            Arc::from(tier.as_str()),
            &plans,
            0,
        );
        let request = Request {
            limits: vec![limit],
            write: false,
            max_wait: None,
        };
        let requests = [&request];
        // The store's time, as every decision's: Redis's `TIME` by default,
        // or the caller's clock.
        let now = (context.now)();
        let call = call::invoke(&mut connection, &context.acquire, &now, 0, &requests);
        match context.within(call).await?.pop() {
            Some(Reply::Decided(outcomes)) => outcomes.first().map(|outcome| Decision {
                allowed: 0,
                rejected: 0,
                remaining: Some(outcome.remaining),
                retry_after: Duration::ZERO,
                reset_after: Duration::from_micros(outcome.reset_after),
            }),
            _ => None,
        }
    } else {
        None
    };
    let list = plans.list_for(&tier);
    let further = if list.further.is_empty() {
        Vec::new()
    } else {
        inspect_further(context, &plans, &names_of_plan, &tier).await?
    };
    Ok(KeyReport {
        policy_name: list.first_name.as_deref().map(str::to_owned),
        tier,
        policy: Some(rule.policy),
        state,
        further,
    })
}

/// What the further policies of the plan of `names` on `tier` have now,
/// read without writing: each one's state, `None` where it holds none.
async fn inspect_further(
    context: &Context,
    plans: &Plans,
    names: &Arc<KeyNames>,
    tier: &str,
) -> Result<Vec<PolicyReport>, StoreError> {
    let plan = ScriptLimit::plan(Arc::clone(names), Arc::from(tier), plans, 0);
    let further = plan.further(plans);
    let mut connection = context.connection.clone();
    let mut exists = redis::pipe();
    for (_, limit) in &further {
        exists.exists(&limit.names.state);
    }
    let exists: Vec<bool> = context.timed(exists.query_async(&mut connection)).await?;
    let request = Request {
        limits: further.iter().map(|(_, limit)| limit.clone()).collect(),
        write: false,
        max_wait: None,
    };
    let requests = [&request];
    let now = (context.now)();
    let call = call::invoke(&mut connection, &context.acquire, &now, 0, &requests);
    let outcomes = match context.within(call).await?.pop() {
        Some(Reply::Decided(outcomes)) if outcomes.len() == further.len() => outcomes,
        _ => return Err(call::unexpected()),
    };
    Ok(further
        .iter()
        .zip(exists)
        .zip(outcomes)
        .map(|(((name, limit), exists), outcome)| PolicyReport {
            name: name.to_string(),
            policy: limit.rule.policy,
            state: exists.then(|| Decision {
                allowed: 0,
                rejected: 0,
                remaining: Some(outcome.remaining),
                retry_after: Duration::ZERO,
                reset_after: Duration::from_micros(outcome.reset_after),
            }),
        })
        .collect())
}

/// The tier `key`'s plan is on.
async fn tier_of(context: &Context, key: &str) -> Result<String, StoreError> {
    let names = context.names(Space::Plan, key);
    let mut connection = context.connection.clone();
    let tier: Option<String> = context.timed(connection.get(&names.tier)).await?;
    Ok(tier
        .filter(|tier| !tier.is_empty())
        .unwrap_or_else(|| DEFAULT_TIER.to_owned()))
}
