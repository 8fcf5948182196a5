//! Every `lookup` case of envoyproxy/ratelimit's conformance data: which limit
//! a descriptor gets, its fields and stats key, and the counters the lookup
//! itself moves.

use std::collections::BTreeMap;

use serde_json::{Value, json};
use tollgate_rls::{
    LimitOverride, MatchedLimit, MemoryStats, RATE_LIMIT_SCOPE, Unit, metadata_to_json,
};
use tollgate_test_support::conformance;

/// The fields of a match, named as the cases name them.
fn fields(found: &MatchedLimit) -> BTreeMap<&'static str, Value> {
    let limit = &found.limit;
    let mut fields = BTreeMap::new();
    fields.insert("requests_per_unit", json!(limit.requests_per_unit));
    fields.insert("unit", json!(limit.unit.proto_name()));
    fields.insert("name", json!(limit.name));
    fields.insert("unlimited", json!(limit.unlimited));
    fields.insert("shadow_mode", json!(limit.shadow_mode));
    fields.insert("stats_key", json!(&*found.stats_key));
    fields.insert(
        "share_threshold_pattern",
        json!(found.share_threshold_key_pattern),
    );
    fields.insert(
        "metadata",
        found
            .metadata
            .as_deref()
            .map_or(Value::Null, metadata_to_json),
    );
    fields
}

fn check(case: &Value) -> Result<(), String> {
    let config = conformance::load_case(case).map_err(|error| format!("load failed: {error}"))?;
    let domain = case["domain"].as_str().ok_or("no domain")?;
    let descriptor = &case["descriptor"];
    let entries: Vec<(String, String)> = descriptor["entries"]
        .as_array()
        .ok_or("no entries")?
        .iter()
        .map(|pair| {
            (
                pair[0].as_str().unwrap_or_default().to_owned(),
                pair[1].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    let limit_override = match descriptor.get("limit") {
        Some(limit) => Some(LimitOverride {
            requests_per_unit: limit["requests_per_unit"]
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .ok_or("bad override")?,
            unit: Unit::from_proto_name(limit["unit"].as_str().unwrap_or_default())
                .ok_or("bad override unit")?,
        }),
        None => None,
    };
    let stats = MemoryStats::new();
    let found = config.get_limit(domain, &entries, limit_override, &stats);
    match (&case["expect"], found) {
        (Value::Null, None) => {}
        (Value::Null, Some(found)) => return Err(format!("expected no limit, got {found:?}")),
        (expect, None) => return Err(format!("expected {expect}, got no limit")),
        (expect, Some(found)) => {
            let actual = fields(&found);
            for (name, expected) in expect.as_object().ok_or("expect is not an object")? {
                let got = actual
                    .get(name.as_str())
                    .ok_or_else(|| format!("unknown expected field {name}"))?;
                if got != expected {
                    return Err(format!("{name}: expected {expected}, got {got}"));
                }
            }
        }
    }
    let prefix = format!("{RATE_LIMIT_SCOPE}.");
    let moved: BTreeMap<String, u64> = stats
        .snapshot()
        .into_iter()
        .map(|(name, count)| {
            (
                name.strip_prefix(&prefix).unwrap_or(&name).to_owned(),
                count,
            )
        })
        .collect();
    // Only some cases say which counters move; those must match exactly.
    let Some(expected) = case.get("expect_stats") else {
        return Ok(());
    };
    let expected: BTreeMap<String, u64> =
        serde_json::from_value(expected.clone()).map_err(|e| e.to_string())?;
    if moved != expected {
        return Err(format!("stats: expected {expected:?}, got {moved:?}"));
    }
    Ok(())
}

#[test]
fn every_lookup_case() {
    let cases = conformance::cases("lookup.jsonl");
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|case| {
            check(case)
                .err()
                .map(|why| format!("{}: {why}", case["id"].as_str().unwrap_or("?")))
        })
        .collect();
    conformance::report("lookup", cases.len(), &failures);
}
