//! Every `aggregate` case of envoyproxy/ratelimit's conformance data
//! (`tests/conformance/envoy-rls/aggregate.jsonl`): the Go test mocks the
//! cache and gives its statuses, so these check the answer built from given
//! statuses (`aggregate::respond`), as the Go test does; the error cases
//! (empty domain, a failing cache) run through the whole service.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tollgate_core::{
    KeyReport, Limit, LimitDecision, LimitUnits, LimiterConfig, ManualClock, MemoryStore, Policy,
    PolicyError, PreparedPolicy, Stats, Store, StoreError, StoreFuture,
};

use super::aggregate::respond;
use super::cache::Checked;
use super::held::Held;
use super::{RateLimitService, ServiceSettings};
use crate::config::metadata::{Metadata, MetadataValue};
use crate::config::stats::MemoryStats;
use crate::proto::{
    Code, CurrentLimit, DescriptorStatus, Entry, RateLimitDescriptor, RateLimitRequest,
};
use crate::service::harness::block_on;
use crate::{LoaderOptions, RateLimitConfig, Unit};

/// The 12 cases of `aggregate.jsonl` (pinned: a lost or cut file fails
/// here rather than passing with fewer).
fn cases() -> Vec<Value> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/conformance/envoy-rls/aggregate.jsonl");
    let cases: Vec<Value> = std::fs::read_to_string(&path)
        .expect("aggregate.jsonl")
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| serde_json::from_str(line).expect("a JSON case"))
        .collect();
    assert_eq!(cases.len(), 12, "the cases of aggregate.jsonl");
    cases
}

fn settings_of(settings: &Value) -> ServiceSettings {
    let flag = |name: &str| settings.get(name).and_then(Value::as_bool).unwrap_or(false);
    let text = |name: &str, default: String| {
        settings
            .get(name)
            .and_then(Value::as_str)
            .map_or(default, str::to_owned)
    };
    let defaults = ServiceSettings::default();
    ServiceSettings {
        shadow_mode: flag("SHADOW_MODE"),
        quota_mode: flag("QUOTA_MODE"),
        limit_response_headers_enabled: flag("LIMIT_RESPONSE_HEADERS_ENABLED"),
        limit_limit_header: text("LIMIT_LIMIT_HEADER", defaults.limit_limit_header.clone()),
        limit_remaining_header: text(
            "LIMIT_REMAINING_HEADER",
            defaults.limit_remaining_header.clone(),
        ),
        limit_reset_header: text("LIMIT_RESET_HEADER", defaults.limit_reset_header.clone()),
        response_dynamic_metadata: flag("RESPONSE_DYNAMIC_METADATA"),
        ..defaults
    }
}

fn request_of(case: &Value) -> RateLimitRequest {
    let request = &case["request"];
    RateLimitRequest {
        domain: request["domain"].as_str().unwrap_or_default().to_owned(),
        descriptors: request["descriptors"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|entries| RateLimitDescriptor {
                entries: entries
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
                ..RateLimitDescriptor::default()
            })
            .collect(),
        hits_addend: request["hits_addend"].as_u64().unwrap_or(0) as u32,
    }
}

fn status_of(status: &Value, now_s: u64) -> DescriptorStatus {
    let code = match status["code"].as_str() {
        Some("OK") => Code::Ok,
        Some("OVER_LIMIT") => Code::OverLimit,
        _ => Code::Unknown,
    };
    let current_limit = status.get("current_limit").map(|limit| CurrentLimit {
        name: String::new(),
        requests_per_unit: limit["requests_per_unit"].as_u64().unwrap_or(0) as u32,
        unit: Unit::from_proto_name(limit["unit"].as_str().unwrap_or_default()).unwrap_or_default(),
    });
    let duration_until_reset = current_limit
        .as_ref()
        .and_then(|limit| limit.unit.seconds())
        .map(|unit| Duration::from_secs(unit - now_s % unit));
    DescriptorStatus {
        code,
        current_limit,
        limit_remaining: status["limit_remaining"].as_u64().unwrap_or(0) as u32,
        duration_until_reset,
        quota: None,
    }
}

fn metadata_of(value: &Value) -> Option<Metadata> {
    let object = value.as_object()?;
    Some(
        object
            .iter()
            .map(|(key, value)| {
                let value = match value {
                    Value::Object(_) => {
                        MetadataValue::Struct(metadata_of(value).unwrap_or_default())
                    }
                    Value::String(text) => MetadataValue::String(text.clone()),
                    other => MetadataValue::String(other.to_string()),
                };
                (key.clone(), value)
            })
            .collect(),
    )
}

/// The answer of a case whose cache statuses are given.
fn answer(case: &Value) -> Result<(Value, BTreeMap<String, u64>), String> {
    let now_s = case["settings"]["now"].as_u64().ok_or("no now")?;
    let settings = settings_of(&case["settings"]);
    let request = request_of(case);
    let limits = case["limits"].as_array().ok_or("no limits")?;
    let statuses = case["cache_statuses"]
        .as_array()
        .ok_or("no cache statuses")?;
    let metadata: Vec<Option<Metadata>> = limits
        .iter()
        .map(|limit| metadata_of(&limit["metadata"]))
        .collect();
    let held: Vec<Held<'_>> = limits
        .iter()
        .zip(&metadata)
        .map(|(limit, metadata)| match limit {
            Value::Null => Held::default(),
            limit if limit["unlimited"].as_bool() == Some(true) => Held {
                unlimited: true,
                ..Held::default()
            },
            limit => Held {
                unlimited: false,
                limited: true,
                quota_mode: limit["quota_mode"].as_bool().unwrap_or(false),
                metadata: metadata.as_ref(),
                policy_name: None,
            },
        })
        .collect();
    let checked: Vec<Checked> = statuses
        .iter()
        .map(|status| Checked {
            status: status_of(status, now_s),
            ..Checked::default()
        })
        .collect();
    let stats = MemoryStats::new();
    let response = respond(&request, &checked, &held, &settings, now_s, &stats);
    Ok((
        serde_json::to_value(&response).map_err(|e| e.to_string())?,
        stats.snapshot(),
    ))
}

/// A store whose every decision fails with `message`.
struct FailingStore {
    inner: MemoryStore,
    message: String,
}

impl Store for FailingStore {
    fn prepare(&self, policy: Policy) -> Result<PreparedPolicy, PolicyError> {
        self.inner.prepare(policy)
    }
    fn acquire<'a>(&'a self, _: &'a [Limit<'a>]) -> StoreFuture<'a, Vec<LimitDecision>> {
        let error = StoreError::Unavailable(self.message.clone());
        Box::pin(std::future::ready(Err(error)))
    }
    fn acquire_units<'a>(&'a self, _: &'a [LimitUnits<'a>]) -> StoreFuture<'a, Vec<LimitDecision>> {
        let error = StoreError::Unavailable(self.message.clone());
        Box::pin(std::future::ready(Err(error)))
    }
    fn is_exempt(&self, key: &str) -> bool {
        self.inner.is_exempt(key)
    }
    fn default_policy(&self) -> StoreFuture<'_, Policy> {
        self.inner.default_policy()
    }
    fn configure(&self, policy: Policy) -> StoreFuture<'_, Policy> {
        self.inner.configure(policy)
    }
    fn assign_tier<'a>(&'a self, key: &'a str, tier: &'a str) -> StoreFuture<'a, ()> {
        self.inner.assign_tier(key, tier)
    }
    fn reset<'a>(&'a self, key: &'a str) -> StoreFuture<'a, bool> {
        self.inner.reset(key)
    }
    fn inspect<'a>(&'a self, key: &'a str) -> StoreFuture<'a, KeyReport> {
        self.inner.inspect(key)
    }
    fn stats(&self) -> StoreFuture<'_, Stats> {
        self.inner.stats()
    }
    fn reconfigure(&self, config: &LimiterConfig) -> Result<(), tollgate_core::ConfigError> {
        self.inner.reconfigure(config)
    }
}

/// The YAML of a case's limits: descriptor `i`'s single entry with limit `i`.
fn limits_yaml(case: &Value) -> String {
    let request = &case["request"];
    let mut yaml = format!(
        "domain: {}\ndescriptors:\n",
        request["domain"]
            .as_str()
            .filter(|d| !d.is_empty())
            .unwrap_or("none")
    );
    for (entries, limit) in request["descriptors"]
        .as_array()
        .into_iter()
        .flatten()
        .zip(case["limits"].as_array().into_iter().flatten())
    {
        if limit.is_null() {
            continue;
        }
        yaml.push_str(&format!(
            "  - key: {}\n    value: {}\n    rate_limit: {{unit: {}, requests_per_unit: {}}}\n",
            entries[0][0].as_str().unwrap_or_default(),
            entries[0][1].as_str().unwrap_or_default(),
            limit["unit"].as_str().unwrap_or_default(),
            limit["requests_per_unit"],
        ));
    }
    yaml
}

/// An error case through the whole service.
fn error_through_service(case: &Value) -> Result<(String, BTreeMap<String, u64>), String> {
    let clock = Arc::new(ManualClock::new(
        case["settings"]["now"].as_u64().unwrap_or(0) * 1_000_000_000,
    ));
    let inner =
        MemoryStore::new(&LimiterConfig::default(), clock.clone()).map_err(|e| e.to_string())?;
    let store: Arc<dyn Store> = match case["cache_statuses"].get("error").and_then(Value::as_str) {
        Some(message) => Arc::new(FailingStore {
            inner,
            message: message.to_owned(),
        }),
        None => Arc::new(inner),
    };
    let yaml = limits_yaml(case);
    let config =
        RateLimitConfig::from_sources(&[("c.yaml", yaml.as_str())], &LoaderOptions::default())
            .map_err(|e| e.to_string())?;
    let service = RateLimitService::new(store, config, settings_of(&case["settings"]), clock);
    match block_on(service.should_rate_limit(&request_of(case))) {
        Ok(response) => Err(format!("answered {response:?}")),
        Err(error) => Ok((error.to_string(), service.stats())),
    }
}

fn check(case: &Value) -> Result<(), String> {
    let expect = &case["expect"];
    let stats = if let Some(error) = expect.get("error") {
        let (got, stats) = error_through_service(case)?;
        if Some(got.as_str()) != error.as_str() {
            return Err(format!("error {got:?}, expected {error}"));
        }
        stats
    } else {
        let (response, stats) = answer(case)?;
        if let Some(code) = expect.get("overall_code")
            && response.get("overallCode").unwrap_or(&json!("UNKNOWN")) != code
        {
            return Err(format!("overall code: {response}"));
        }
        if let Some(statuses) = expect.get("statuses").and_then(Value::as_array) {
            let got = response["statuses"].as_array().cloned().unwrap_or_default();
            if got.len() != statuses.len() {
                return Err(format!("statuses: {response}"));
            }
            for (got, expected) in got.iter().zip(statuses) {
                let same_code = got.get("code") == expected.get("code");
                let same_remaining =
                    got.get("limitRemaining").unwrap_or(&json!(0)) == &expected["limit_remaining"];
                let same_limit = match (got.get("currentLimit"), expected.get("current_limit")) {
                    (None, None) => true,
                    (Some(got), Some(expected)) => {
                        got["requestsPerUnit"] == expected["requests_per_unit"]
                            && got["unit"] == expected["unit"]
                    }
                    _ => false,
                };
                if !(same_code && same_remaining && same_limit) {
                    return Err(format!("status {got}, expected {expected}"));
                }
            }
        }
        if let Some(headers) = expect.get("response_headers_to_add") {
            let got: Vec<Value> = response["responseHeadersToAdd"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|header| json!([header["key"], header["value"]]))
                .collect();
            if &json!(got) != headers {
                return Err(format!("headers {got:?}, expected {headers}"));
            }
        }
        if let Some(fields) = expect
            .get("dynamic_metadata_fields")
            .and_then(Value::as_object)
        {
            for (name, value) in fields {
                if response["dynamicMetadata"].get(name) != Some(value) {
                    return Err(format!(
                        "dynamic metadata {name}: {}",
                        response["dynamicMetadata"]
                    ));
                }
            }
        }
        stats
    };
    for (name, value) in case
        .get("expect_stats")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        let got = stats
            .get(&format!("ratelimit.service.{name}"))
            .copied()
            .unwrap_or(0);
        if Some(got) != value.as_u64() {
            return Err(format!("{name} = {got}, expected {value}"));
        }
    }
    Ok(())
}

#[test]
fn every_aggregate_case() {
    let cases = cases();
    assert!(!cases.is_empty());
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|case| check(case).err().map(|e| format!("{}: {e}", case["id"])))
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} aggregate cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

/// `TOLLGATE_STORE_FAILURE`: a failing store answered as the policy says,
/// counted; without a policy, the Go service's error.
#[test]
fn store_failure_policies() {
    let yaml = "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: minute, requests_per_unit: 5, name: per_a}\n  - key: u\n    rate_limit: {unlimited: true}\n";
    let request = RateLimitRequest {
        domain: "d".into(),
        descriptors: [("a", "1"), ("u", "1"), ("none", "1")]
            .into_iter()
            .map(|(key, value)| RateLimitDescriptor {
                entries: vec![Entry::new(key, value)],
                ..Default::default()
            })
            .collect(),
        hits_addend: 0,
    };
    let answer = |policy: Option<tollgate_core::FailurePolicy>| {
        let clock = Arc::new(ManualClock::new(60_000_000_000));
        let inner = MemoryStore::new(&LimiterConfig::default(), clock.clone()).unwrap();
        let store: Arc<dyn Store> = Arc::new(FailingStore {
            inner,
            message: "Redis did not answer in time".to_owned(),
        });
        let config =
            RateLimitConfig::from_sources(&[("d.yaml", yaml)], &LoaderOptions::default()).unwrap();
        let mut settings = ServiceSettings::default();
        settings.extensions.store_failure = policy;
        let service = RateLimitService::new(store, config, settings, clock);
        let result = block_on(service.should_rate_limit(&request));
        (result, service.stats())
    };

    let (error, stats) = answer(None);
    assert_eq!(
        error.unwrap_err(),
        super::ServiceError::Store("Redis did not answer in time".to_owned())
    );
    assert_eq!(
        stats["ratelimit.service.call.should_rate_limit.redis_error"],
        1
    );
    assert!(!stats.keys().any(|name| name.contains("store_failure")));

    let (open, stats) = answer(Some(tollgate_core::FailurePolicy::FailOpen));
    let open = open.unwrap();
    assert_eq!(open.overall_code, Code::Ok);
    let codes: Vec<(Code, bool, u32)> = open
        .statuses
        .iter()
        .map(|s| (s.code, s.current_limit.is_some(), s.limit_remaining))
        .collect();
    assert_eq!(
        codes,
        [
            (Code::Ok, false, 0),
            (Code::Ok, false, u32::MAX),
            (Code::Ok, false, 0)
        ]
    );
    assert_eq!(stats["ratelimit.service.store_failure.fail_open"], 1);
    assert_eq!(
        stats["ratelimit.service.call.should_rate_limit.redis_error"],
        1
    );

    let (closed, stats) = answer(Some(tollgate_core::FailurePolicy::FailClosed));
    let closed = closed.unwrap();
    assert_eq!(closed.overall_code, Code::OverLimit);
    assert_eq!(closed.statuses[0].code, Code::OverLimit);
    assert_eq!(
        closed.statuses[0].current_limit,
        Some(CurrentLimit {
            name: "per_a".to_owned(),
            requests_per_unit: 5,
            unit: Unit::Minute
        })
    );
    assert_eq!(closed.statuses[0].limit_remaining, 0);
    assert_eq!(
        (closed.statuses[1].code, closed.statuses[2].code),
        (Code::Ok, Code::Ok)
    );
    assert_eq!(stats["ratelimit.service.store_failure.fail_closed"], 1);
}
