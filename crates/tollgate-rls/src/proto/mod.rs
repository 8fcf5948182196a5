//! Envoy's rate limit protocol, `envoy.service.ratelimit.v3`, as plain Rust
//! types: the `RateLimitRequest` the service reads and the `RateLimitResponse`
//! it answers, with serde in the proto3 JSON mapping the Go service's `/json`
//! endpoint speaks (`protojson`): lowerCamelCase names on output, both the JSON
//! and the proto names accepted on input, unknown fields refused, enums by
//! name (or number on input), `uint64` wrappers as strings, durations as
//! `"12s"`, bytes as base64, fields at their default left out.
//!
//! The gRPC layer converts the `envoy-types` prost messages to and from these.

mod json;

use std::time::Duration;

use serde::{Deserialize, Serialize, Serializer};

use crate::config::metadata::{Metadata, metadata_to_json};
use crate::config::unit::Unit;
use json::{
    ProtoEnum, de_enum, de_null_default, de_opt_u64, de_u32, duration_text, ser_bytes,
    ser_opt_u64_string, timestamp_text,
};

/// `envoy.service.ratelimit.v3.RateLimitRequest`.
///
/// JSON: `{"domain": "edge", "descriptors": [{"entries": [{"key": "k",
/// "value": "v"}]}], "hitsAddend": 1}`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RateLimitRequest {
    /// `domain` (1): the configuration domain; must not be empty.
    #[serde(default, deserialize_with = "de_null_default")]
    #[serde(skip_serializing_if = "String::is_empty")]
    pub domain: String,
    /// `descriptors` (2): each matched and decided on its own.
    #[serde(default, deserialize_with = "de_null_default")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub descriptors: Vec<RateLimitDescriptor>,
    /// `hits_addend` (3, uint32): hits to add for every descriptor without its
    /// own; 0 (the default) counts as 1.
    #[serde(default, alias = "hits_addend", deserialize_with = "de_u32")]
    #[serde(skip_serializing_if = "is_zero_u32")]
    pub hits_addend: u32,
}

/// `envoy.extensions.common.ratelimit.v3.RateLimitDescriptor`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RateLimitDescriptor {
    /// `entries` (1): the `key`/`value` pairs, in order.
    #[serde(default, deserialize_with = "de_null_default")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub entries: Vec<Entry>,
    /// `limit` (2): a limit that replaces the configuration's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<RateLimitOverride>,
    /// `hits_addend` (3, `google.protobuf.UInt64Value`): this descriptor's
    /// hits; `Some(0)` is a peek (the counter is read, nothing added). A
    /// string in JSON.
    #[serde(default, alias = "hits_addend", deserialize_with = "de_opt_u64")]
    #[serde(serialize_with = "ser_opt_u64_string")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hits_addend: Option<u64>,
    /// `is_negative_hits` (4): the hits are to be given back. The Go service
    /// ignores it, and so does tollgate unless `TOLLGATE_REFUNDS` is on.
    #[serde(
        default,
        alias = "is_negative_hits",
        deserialize_with = "de_null_default"
    )]
    #[serde(skip_serializing_if = "is_false")]
    pub is_negative_hits: bool,
}

/// `RateLimitDescriptor.Entry`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    /// `key` (1).
    #[serde(default, deserialize_with = "de_null_default")]
    #[serde(skip_serializing_if = "String::is_empty")]
    pub key: String,
    /// `value` (2), may be empty.
    #[serde(default, deserialize_with = "de_null_default")]
    #[serde(skip_serializing_if = "String::is_empty")]
    pub value: String,
}

impl Entry {
    /// An entry of `key` and `value`.
    pub fn new(key: impl Into<String>, value: impl Into<String>) -> Entry {
        Entry {
            key: key.into(),
            value: value.into(),
        }
    }
}

impl crate::config::lookup::DescriptorEntry for Entry {
    fn key(&self) -> &str {
        &self.key
    }

    fn value(&self) -> &str {
        &self.value
    }
}

/// `RateLimitDescriptor.RateLimitOverride`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RateLimitOverride {
    /// `requests_per_unit` (1).
    #[serde(default, alias = "requests_per_unit", deserialize_with = "de_u32")]
    #[serde(skip_serializing_if = "is_zero_u32")]
    pub requests_per_unit: u32,
    /// `unit` (2, `envoy.type.v3.RateLimitUnit`, same numbers as the
    /// response's unit); a number outside 1..=7 reads as [`Unit::Unknown`].
    #[serde(default = "unknown_unit", deserialize_with = "de_enum")]
    #[serde(serialize_with = "ser_unit", skip_serializing_if = "is_unknown_unit")]
    pub unit: Unit,
}

/// `RateLimitResponse.Code`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Code {
    /// `UNKNOWN` (0).
    #[default]
    Unknown,
    /// `OK` (1).
    Ok,
    /// `OVER_LIMIT` (2).
    OverLimit,
}

impl Code {
    /// The protocol name: `UNKNOWN`, `OK`, `OVER_LIMIT`.
    pub fn proto_name(self) -> &'static str {
        match self {
            Code::Unknown => "UNKNOWN",
            Code::Ok => "OK",
            Code::OverLimit => "OVER_LIMIT",
        }
    }

    /// The protocol number (0, 1, 2).
    pub fn proto_value(self) -> i32 {
        match self {
            Code::Unknown => 0,
            Code::Ok => 1,
            Code::OverLimit => 2,
        }
    }

    /// The code of a protocol number; any other number is `Unknown`.
    pub fn from_proto_value(value: i32) -> Code {
        match value {
            1 => Code::Ok,
            2 => Code::OverLimit,
            _ => Code::Unknown,
        }
    }
}

impl Serialize for Code {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.proto_name())
    }
}

/// `envoy.service.ratelimit.v3.RateLimitResponse`.
///
/// JSON (proto3, defaults left out): `{"overallCode": "OK", "statuses":
/// [{"code": "OK", "currentLimit": {"requestsPerUnit": 10, "unit": "MINUTE"},
/// "limitRemaining": 9, "durationUntilReset": "30s"}]}`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RateLimitResponse {
    /// `overall_code` (1).
    #[serde(skip_serializing_if = "is_unknown_code")]
    pub overall_code: Code,
    /// `statuses` (2): one per request descriptor, in order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub statuses: Vec<DescriptorStatus>,
    /// `response_headers_to_add` (3).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub response_headers_to_add: Vec<HeaderValue>,
    /// `request_headers_to_add` (4).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub request_headers_to_add: Vec<HeaderValue>,
    /// `raw_body` (5), base64 in JSON.
    #[serde(skip_serializing_if = "Vec::is_empty", serialize_with = "ser_bytes")]
    pub raw_body: Vec<u8>,
    /// `dynamic_metadata` (6, `google.protobuf.Struct`).
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "ser_metadata"
    )]
    pub dynamic_metadata: Option<Metadata>,
    /// `quota` (7).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quota: Option<Quota>,
}

/// `RateLimitResponse.DescriptorStatus`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DescriptorStatus {
    /// `code` (1).
    #[serde(skip_serializing_if = "is_unknown_code")]
    pub code: Code,
    /// `current_limit` (2): the limit that decided; `None` when none applies
    /// (and for an unlimited descriptor).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub current_limit: Option<CurrentLimit>,
    /// `limit_remaining` (3): hits left in the window (2^32-1 for an
    /// unlimited descriptor).
    #[serde(skip_serializing_if = "is_zero_u32")]
    pub limit_remaining: u32,
    /// `duration_until_reset` (4, `google.protobuf.Duration`, `"30s"`): until
    /// the window ends; set with `current_limit`.
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "ser_duration"
    )]
    pub duration_until_reset: Option<Duration>,
    /// `quota` (5): never set by the Go service.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quota: Option<Quota>,
}

/// `RateLimitResponse.RateLimit`: the limit a status reports.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CurrentLimit {
    /// `name` (3): `rate_limit.name` of the configuration.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// `requests_per_unit` (1).
    #[serde(skip_serializing_if = "is_zero_u32")]
    pub requests_per_unit: u32,
    /// `unit` (2), by name.
    #[serde(serialize_with = "ser_unit", skip_serializing_if = "is_unknown_unit")]
    pub unit: Unit,
}

/// `RateLimitResponse.Quota`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Quota {
    /// `requests` (1, uint32).
    #[serde(skip_serializing_if = "is_zero_u32")]
    pub requests: u32,
    /// `valid_until` (2, `google.protobuf.Timestamp`, RFC 3339 in JSON).
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "ser_timestamp"
    )]
    pub valid_until: Option<Timestamp>,
    /// `id` (3).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub id: String,
}

/// `google.protobuf.Timestamp`: seconds and nanoseconds since the epoch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Timestamp {
    /// Seconds since 1970-01-01T00:00:00Z.
    pub seconds: i64,
    /// Nanoseconds, 0 to 999,999,999.
    pub nanos: i32,
}

/// `envoy.config.core.v3.HeaderValue`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HeaderValue {
    /// `key` (1): the header name.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub key: String,
    /// `value` (2).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub value: String,
    /// `raw_value` (3), base64 in JSON.
    #[serde(skip_serializing_if = "Vec::is_empty", serialize_with = "ser_bytes")]
    pub raw_value: Vec<u8>,
}

impl HeaderValue {
    /// A header of `key` and `value`.
    pub fn new(key: impl Into<String>, value: impl Into<String>) -> HeaderValue {
        HeaderValue {
            key: key.into(),
            value: value.into(),
            raw_value: Vec::new(),
        }
    }
}

impl ProtoEnum for Unit {
    fn from_name(name: &str) -> Option<Unit> {
        Unit::from_proto_name(name)
    }

    fn from_number(number: i32) -> Unit {
        Unit::from_proto_value(number)
    }
}

fn unknown_unit() -> Unit {
    Unit::Unknown
}

fn is_unknown_unit(unit: &Unit) -> bool {
    *unit == Unit::Unknown
}

fn is_unknown_code(code: &Code) -> bool {
    *code == Code::Unknown
}

fn is_zero_u32(value: &u32) -> bool {
    *value == 0
}

fn is_false(value: &bool) -> bool {
    !*value
}

fn ser_unit<S: Serializer>(unit: &Unit, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(unit.proto_name())
}

fn ser_duration<S: Serializer>(
    duration: &Option<Duration>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    match duration {
        Some(duration) => {
            let seconds = i64::try_from(duration.as_secs()).unwrap_or(i64::MAX);
            let nanos = i32::try_from(duration.subsec_nanos()).unwrap_or(0);
            serializer.serialize_str(&duration_text(seconds, nanos))
        }
        None => serializer.serialize_none(),
    }
}

fn ser_timestamp<S: Serializer>(
    timestamp: &Option<Timestamp>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    match timestamp {
        Some(t) => serializer.serialize_str(&timestamp_text(t.seconds, t.nanos)),
        None => serializer.serialize_none(),
    }
}

fn ser_metadata<S: Serializer>(
    metadata: &Option<Metadata>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    match metadata {
        Some(metadata) => metadata_to_json(metadata).serialize(serializer),
        None => serializer.serialize_none(),
    }
}

#[cfg(test)]
mod tests;
