//! Every `counter` and `rls` case of envoyproxy/ratelimit's conformance data,
//! through the service (`RateLimitService`, and for `rls` the harness that
//! drives it), on the in-memory store and on Redis: each case on a store of
//! its own (on Redis, under a key prefix of its own), on a manual clock. The
//! number of cases each run reads is pinned (`conformance::cases`), so a lost
//! file fails both. The `aggregate` cases, whose cache answers are given
//! rather than computed, are unit tests of the service's answer
//! (`src/service/aggregate_cases.rs`).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde_json::{Value, json};
use tollgate_core::{
    Clock, Limit, LimitUnits, LimiterConfig, ManualClock, MemoryStore, Policy, Store,
};
use tollgate_redis::RedisStore;
use tollgate_rls::harness::run_on;
use tollgate_rls::proto::{Entry, RateLimitDescriptor, RateLimitRequest};
use tollgate_rls::{LoaderOptions, RateLimitConfig, RateLimitService, ServiceSettings, Unit};
use tollgate_test_support::conformance;
use tollgate_test_support::redis as redis_support;

/// Where a run keeps its limits.
enum Stores {
    /// A `MemoryStore` per case.
    Memory,
    /// A `RedisStore` per case on the Redis at this URL, under a key prefix
    /// of the case's own.
    Redis(String),
}

/// A case's store and, on Redis, its keys, deleted once the store is gone
/// (when the case ends or fails).
struct CaseStore {
    store: Arc<dyn Store>,
    _keys: Option<Keys>,
}

/// A case's keys on Redis.
struct Keys {
    url: String,
    prefix: String,
}

impl Drop for Keys {
    fn drop(&mut self) {
        redis_support::cleanup(&self.url, &self.prefix);
    }
}

impl Stores {
    /// A fresh store for the case `id`, deciding on `clock`.
    fn open(&self, id: &Value, clock: &Arc<ManualClock>) -> Result<CaseStore, String> {
        let limits = LimiterConfig::default();
        match self {
            Stores::Memory => {
                let store = MemoryStore::new(&limits, clock.clone()).map_err(|e| e.to_string())?;
                Ok(CaseStore {
                    store: Arc::new(store),
                    _keys: None,
                })
            }
            Stores::Redis(url) => {
                let prefix = redis_support::prefix(&format!(
                    "conformance-{}",
                    id.as_str().unwrap_or_default()
                ));
                let config = redis_support::on_manual_clock(url, &prefix, clock.clone());
                let store = RedisStore::connect(config, &limits).map_err(|e| e.to_string())?;
                let keys = Keys {
                    url: url.clone(),
                    prefix,
                };
                Ok(CaseStore {
                    store: Arc::new(store),
                    _keys: Some(keys),
                })
            }
        }
    }
}

/// Compares the statuses an answer gave (proto3 JSON) with a case's: the
/// fields the case gives; a case status without `current_limit` means none.
fn compare_statuses(got: &Value, expected: &Value) -> Result<(), String> {
    let got = got.as_array().cloned().unwrap_or_default();
    let expected = expected.as_array().ok_or("statuses not a list")?;
    if got.len() != expected.len() {
        return Err(format!(
            "{} statuses, expected {}",
            got.len(),
            expected.len()
        ));
    }
    for (index, (got, expected)) in got.iter().zip(expected).enumerate() {
        let fail = |what: &str| {
            Err(format!(
                "status {index}: {what}: got {got}, expected {expected}"
            ))
        };
        if let Some(code) = expected.get("code")
            && got.get("code").unwrap_or(&json!("UNKNOWN")) != code
        {
            return fail("code");
        }
        if let Some(remaining) = expected.get("limit_remaining")
            && got.get("limitRemaining").unwrap_or(&json!(0)) != remaining
        {
            return fail("limit_remaining");
        }
        match (expected.get("current_limit"), got.get("currentLimit")) {
            (None, None) => {}
            (Some(limit), Some(current)) => {
                let rpu = current.get("requestsPerUnit").cloned().unwrap_or(json!(0));
                if rpu != limit["requests_per_unit"] || current.get("unit") != Some(&limit["unit"])
                {
                    return fail("current_limit");
                }
            }
            _ => return fail("current_limit presence"),
        }
        if let Some(reset) = expected.get("duration_until_reset") {
            let text = format!("{}s", reset);
            if got.get("durationUntilReset") != Some(&json!(text)) {
                return fail("duration_until_reset");
            }
        }
    }
    Ok(())
}

fn proto_request(request: &Value) -> Value {
    let descriptors: Vec<Value> = request["descriptors"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|descriptor| {
            let mut out = serde_json::Map::new();
            let entries: Vec<Value> = descriptor["entries"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|pair| json!({"key": pair[0], "value": pair[1]}))
                .collect();
            out.insert("entries".into(), json!(entries));
            if let Some(limit) = descriptor.get("limit") {
                out.insert("limit".into(), limit.clone());
            }
            if let Some(hits) = descriptor.get("hits_addend") {
                out.insert("hits_addend".into(), hits.clone());
            }
            Value::Object(out)
        })
        .collect();
    json!({
        "domain": request["domain"],
        "descriptors": descriptors,
        "hits_addend": request.get("hits_addend").cloned().unwrap_or(json!(0)),
    })
}

fn settings_of(settings: &Value) -> ServiceSettings {
    let flag = |name: &str| settings.get(name).and_then(Value::as_bool).unwrap_or(false);
    ServiceSettings {
        shadow_mode: flag("SHADOW_MODE"),
        quota_mode: flag("QUOTA_MODE"),
        stop_cache_key_increment_when_overlimit: flag("STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT"),
        local_cache_size_bytes: settings
            .get("LOCAL_CACHE_SIZE_IN_BYTES")
            .and_then(Value::as_u64)
            .unwrap_or(0),
        ..ServiceSettings::default()
    }
}

/// One `rls` case: its configs as the starting directory, its steps through
/// the harness (a reload step at the time of the step before it), on a
/// store of `stores`.
async fn check_rls(case: &Value, stores: &Stores) -> Result<(), String> {
    let read = conformance::config_file;
    let files = case["configs"]
        .as_array()
        .ok_or("no configs")?
        .iter()
        .map(|file| {
            let file = file.as_str().unwrap_or_default();
            Ok((file.to_owned(), read(file)?))
        })
        .collect::<Result<Vec<_>, String>>()?;
    let steps = case["steps"].as_array().ok_or("no steps")?;
    let mut now = 0;
    let mut input = Vec::new();
    for step in steps {
        now = step["now"].as_u64().unwrap_or(now);
        input.push(match step.get("action").and_then(Value::as_str) {
            Some("add_config") => {
                let file = step["file"].as_str().unwrap_or_default();
                json!({"now": now, "add_config": {"name": file, "yaml": read(file)?}})
            }
            Some("remove_config") => json!({"now": now, "remove_config": step["file"]}),
            Some(other) => return Err(format!("unknown action {other}")),
            None => json!({"now": now, "request": proto_request(&step["request"])}),
        });
    }
    let clock = Arc::new(ManualClock::new(0));
    let case_store = stores.open(&case["id"], &clock)?;
    let output = run_on(
        Arc::clone(&case_store.store),
        clock,
        files,
        settings_of(&case["settings"]),
        LoaderOptions::default(),
        &serde_json::to_vec(&input).map_err(|e| e.to_string())?,
    )
    .await
    .map_err(|error| error.to_string())?;
    let outputs: Vec<Value> = serde_json::from_slice(&output).map_err(|e| e.to_string())?;
    let mut previous_stats = json!({});
    for (index, (step, got)) in steps.iter().zip(&outputs).enumerate() {
        let at = |message: String| format!("step {index}: {message}");
        if let Some(expect) = step.get("expect") {
            let response = got
                .get("response")
                .ok_or_else(|| at(format!("no response: {got}")))?;
            if let Some(code) = expect.get("overall_code")
                && response.get("overallCode").unwrap_or(&json!("UNKNOWN")) != code
            {
                return Err(at(format!("overall code {response}")));
            }
            if let Some(statuses) = expect.get("statuses") {
                compare_statuses(&response["statuses"], statuses).map_err(at)?;
            }
        }
        if step.get("action").is_some() && got.get("config") != Some(&json!("loaded")) {
            return Err(at(format!("reload: {got}")));
        }
        let stats = &got["stats"];
        for (name, value) in step
            .get("expect_stats")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            if stats.get(name).unwrap_or(&json!(0)) != value {
                return Err(at(format!(
                    "{name} = {:?}, expected {value}",
                    stats.get(name)
                )));
            }
        }
        for name in step
            .get("expect_stats_increase")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let name = name.as_str().unwrap_or_default();
            let (before, after) = (
                previous_stats
                    .get(name)
                    .and_then(Value::as_u64)
                    .unwrap_or(0),
                stats.get(name).and_then(Value::as_u64).unwrap_or(0),
            );
            if after <= before {
                return Err(at(format!("{name} did not increase ({before} -> {after})")));
            }
        }
        previous_stats = stats.clone();
    }
    Ok(())
}

/// Every `rls` case (as many as pinned) on a store of `stores` each.
async fn every_rls_case_on(stores: Stores) {
    let cases = conformance::cases("rls.jsonl");
    let mut failures = Vec::new();
    for case in &cases {
        if let Err(error) = check_rls(case, &stores).await {
            failures.push(format!("{}: {error}", case["id"]));
        }
    }
    conformance::report("rls", cases.len(), &failures);
}

#[tokio::test]
async fn every_rls_case() {
    every_rls_case_on(Stores::Memory).await;
}

#[tokio::test]
#[cfg_attr(not(has_redis), ignore = "set REDIS_URL=redis://127.0.0.1:6379 to run")]
async fn every_rls_case_on_redis() {
    every_rls_case_on(Stores::Redis(redis_support::require_redis_url())).await;
}

/// The YAML of a `counter` case: a descriptor tree holding limit `i` at the
/// path of the first step's descriptor `i`.
fn counter_yaml(case: &Value) -> String {
    #[derive(Default)]
    struct Node {
        children: BTreeMap<(String, String), Node>,
        limit: Option<Value>,
    }
    fn write(node: &Node, depth: usize, out: &mut String) {
        let pad = "  ".repeat(depth);
        for ((key, value), child) in &node.children {
            out.push_str(&format!("{pad}- key: {key}\n{pad}  value: {value}\n"));
            if let Some(limit) = &child.limit {
                out.push_str(&format!(
                    "{pad}  shadow_mode: {}\n{pad}  rate_limit: {{unit: {}, requests_per_unit: {}}}\n",
                    limit["shadow_mode"].as_bool().unwrap_or(false),
                    limit["unit"].as_str().unwrap_or_default(),
                    limit["requests_per_unit"]
                ));
            }
            if !child.children.is_empty() {
                out.push_str(&format!("{pad}  descriptors:\n"));
                write(child, depth + 1, out);
            }
        }
    }
    let mut root = Node::default();
    let descriptors = case["steps"][0]["descriptors"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for (descriptor, limit) in descriptors
        .iter()
        .zip(case["limits"].as_array().into_iter().flatten())
    {
        let mut node = &mut root;
        for pair in descriptor.as_array().into_iter().flatten() {
            let key = (
                pair[0].as_str().unwrap_or_default().to_owned(),
                pair[1].as_str().unwrap_or_default().to_owned(),
            );
            node = node.children.entry(key).or_default();
        }
        if !limit.is_null() {
            node.limit = Some(limit.clone());
        }
    }
    let mut out = format!(
        "domain: {}\ndescriptors:\n",
        case["domain"].as_str().unwrap_or_default()
    );
    write(&root, 0, &mut out);
    out
}

/// One `counter` case through the service. The Go test's Redis mock replies
/// with values that jump (other clients share the counter), so before each
/// step the store is charged, on the descriptor's own key and policy, until
/// its counter equals what the mock says it was before the step (reply minus
/// the step's `INCRBY`): the service then reads back the reply. The `EXPIRE`
/// commands and keys' window suffixes are Redis's business: tollgate's store
/// key is the Go key without the window (checked here, since the charge
/// lands where the service looks only if the keys agree). On a store of
/// `stores`.
async fn check_counter(case: &Value, stores: &Stores) -> Result<(), String> {
    let settings = &case["settings"];
    let yaml = counter_yaml(case);
    let config = RateLimitConfig::from_sources(
        &[("counter.yaml", yaml.as_str())],
        &LoaderOptions::default(),
    )
    .map_err(|error| format!("{error}\n{yaml}"))?;
    let service_settings = ServiceSettings {
        near_limit_ratio: settings["near_limit_ratio"].as_f64().unwrap_or(0.8) as f32,
        local_cache_size_bytes: if settings["local_cache"].as_bool().unwrap_or(false) {
            1 << 20
        } else {
            0
        },
        stop_cache_key_increment_when_overlimit:
            settings["stop_cache_key_increment_when_overlimit"]
                .as_bool()
                .unwrap_or(false),
        cache_key_prefix: settings["cache_key_prefix"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
        ..ServiceSettings::default()
    };
    let clock = Arc::new(ManualClock::new(0));
    let case_store = stores.open(&case["id"], &clock)?;
    let store = &case_store.store;
    let service = RateLimitService::new(store.clone(), config, service_settings, clock.clone());
    let domain = case["domain"].as_str().unwrap_or_default();
    let limits = case["limits"].as_array().ok_or("no limits")?;
    let mut counters: HashMap<String, u64> = HashMap::new();
    for (index, step) in case["steps"]
        .as_array()
        .ok_or("no steps")?
        .iter()
        .enumerate()
    {
        let at = |message: String| format!("step {index}: {message}");
        let now = step["now"].as_u64().ok_or("no now")?;
        clock.advance(std::time::Duration::from_nanos(
            now * 1_000_000_000 - clock.now_nanos(),
        ));
        let descriptors = step["descriptors"].as_array().ok_or("no descriptors")?;
        // The limited descriptors, in order, meet the INCRBYs in order.
        let mut incrbys = step["redis"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|command| command["cmd"] == "INCRBY");
        for (descriptor, limit) in descriptors.iter().zip(limits) {
            if limit.is_null() {
                continue;
            }
            let Some(command) = incrbys.next() else { break };
            let redis_key = command["key"].as_str().unwrap_or_default();
            let key = redis_key
                .rsplit_once('_')
                .map_or(redis_key, |(key, _)| key)
                .to_owned()
                + "_";
            let before =
                command["reply"].as_u64().unwrap_or(0) - command["by"].as_u64().unwrap_or(0);
            let counter = counters.entry(key.clone()).or_insert(0);
            let charge = before
                .checked_sub(*counter)
                .ok_or_else(|| at(format!("{key}: the counter would go back")))?;
            let unit =
                Unit::from_proto_name(limit["unit"].as_str().unwrap_or_default()).ok_or("unit")?;
            let policy = Policy::fixed_window_counting_refused(
                limit["requests_per_unit"].as_u64().unwrap_or(0),
                unit.seconds().unwrap_or(1),
            )
            .map_err(|e| e.to_string())?;
            let prepared = store.prepare(policy).map_err(|e| e.to_string())?;
            let limits = [LimitUnits {
                limit: Limit::Policy {
                    key: &key,
                    policy: &prepared,
                },
                units: charge,
            }];
            store
                .acquire_units(&limits)
                .await
                .map_err(|e| e.to_string())?;
            *counter = command["reply"].as_u64().unwrap_or(0);
            let _ = descriptor;
        }
        let request = RateLimitRequest {
            domain: domain.to_owned(),
            descriptors: descriptors
                .iter()
                .enumerate()
                .map(|(at, descriptor)| RateLimitDescriptor {
                    entries: descriptor
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(|pair| {
                            Entry::new(
                                pair[0].as_str().unwrap_or_default(),
                                pair[1].as_str().unwrap_or_default(),
                            )
                        })
                        .collect(),
                    hits_addend: step
                        .get("descriptor_hits_addend")
                        .and_then(|hits| hits[at].as_u64()),
                    ..RateLimitDescriptor::default()
                })
                .collect(),
            hits_addend: step.get("hits_addend").and_then(Value::as_u64).unwrap_or(0) as u32,
        };
        let response = service
            .should_rate_limit(&request)
            .await
            .map_err(|e| at(e.to_string()))?;
        let response = serde_json::to_value(&response).map_err(|e| e.to_string())?;
        compare_statuses(&response["statuses"], &step["expect"]["statuses"]).map_err(at)?;
        let stats = service.stats();
        for (descriptor, expected) in descriptors
            .iter()
            .zip(step["expect"]["stats"].as_array().into_iter().flatten())
        {
            let path: Vec<String> = descriptor
                .as_array()
                .into_iter()
                .flatten()
                .map(|pair| {
                    format!(
                        "{}_{}",
                        pair[0].as_str().unwrap_or_default(),
                        pair[1].as_str().unwrap_or_default()
                    )
                })
                .collect();
            let base = format!("ratelimit.service.rate_limit.{domain}.{}", path.join("."));
            for (name, value) in expected.as_object().into_iter().flatten() {
                let got = stats.get(&format!("{base}.{name}")).copied().unwrap_or(0);
                if Some(got) != value.as_u64() {
                    return Err(at(format!("{base}.{name} = {got}, expected {value}")));
                }
            }
        }
    }
    Ok(())
}

/// Every `counter` case (as many as pinned) on a store of `stores` each.
async fn every_counter_case_on(stores: Stores) {
    let cases = conformance::cases("counter.jsonl");
    let mut failures = Vec::new();
    for case in &cases {
        if let Err(error) = check_counter(case, &stores).await {
            failures.push(format!("{}: {error}", case["id"]));
        }
    }
    conformance::report("counter", cases.len(), &failures);
}

#[tokio::test]
async fn every_counter_case() {
    every_counter_case_on(Stores::Memory).await;
}

#[tokio::test]
#[cfg_attr(not(has_redis), ignore = "set REDIS_URL=redis://127.0.0.1:6379 to run")]
async fn every_counter_case_on_redis() {
    every_counter_case_on(Stores::Redis(redis_support::require_redis_url())).await;
}
