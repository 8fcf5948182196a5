//! A descriptor's `metadata`: arbitrary YAML kept as a protobuf `Struct`, as
//! envoyproxy/ratelimit converts it (`parseMetadata`, `structpb.NewStruct`):
//! numbers become doubles, keys of nested maps become their Go `%v` text.

use std::collections::BTreeMap;

use crate::config::yaml::go_value::GoValue;
use crate::config::yaml::gofmt::format_v;

/// A descriptor's metadata: a protobuf `Struct`, fields by name.
pub type Metadata = BTreeMap<String, MetadataValue>;

/// One value of a protobuf `Struct` (`google.protobuf.Value`).
#[derive(Clone, Debug, PartialEq)]
pub enum MetadataValue {
    /// `null_value`.
    Null,
    /// `bool_value`.
    Bool(bool),
    /// `number_value`: every YAML number, as a double.
    Number(f64),
    /// `string_value` (timestamps keep their text).
    String(String),
    /// `list_value`.
    List(Vec<MetadataValue>),
    /// `struct_value`.
    Struct(Metadata),
}

impl MetadataValue {
    fn from_go(value: &GoValue) -> MetadataValue {
        match value {
            GoValue::Nil => MetadataValue::Null,
            GoValue::Bool(value) => MetadataValue::Bool(*value),
            GoValue::Int(value) => MetadataValue::Number(*value as f64),
            GoValue::Uint(value) => MetadataValue::Number(*value as f64),
            GoValue::Float(value) => MetadataValue::Number(*value),
            GoValue::Str(value) => MetadataValue::String(value.clone()),
            GoValue::Seq(items) => MetadataValue::List(items.iter().map(Self::from_go).collect()),
            GoValue::Map(entries) => MetadataValue::Struct(
                entries
                    .iter()
                    .map(|(key, value)| (format_v(key), Self::from_go(value)))
                    .collect(),
            ),
        }
    }

    /// The value as JSON (protobuf's JSON mapping): whole numbers as integers,
    /// NaN and infinities (which JSON cannot hold) as `null`.
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            MetadataValue::Null => serde_json::Value::Null,
            MetadataValue::Bool(value) => serde_json::Value::Bool(*value),
            MetadataValue::Number(value) => number_to_json(*value),
            MetadataValue::String(value) => serde_json::Value::String(value.clone()),
            MetadataValue::List(items) => items.iter().map(Self::to_json).collect(),
            MetadataValue::Struct(fields) => metadata_to_json(fields),
        }
    }
}

fn number_to_json(value: f64) -> serde_json::Value {
    const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53
    if value.fract() == 0.0 && value.abs() <= EXACT {
        serde_json::Value::from(value as i64)
    } else {
        serde_json::Number::from_f64(value)
            .map_or(serde_json::Value::Null, serde_json::Value::Number)
    }
}

/// A whole metadata struct as a JSON object.
pub fn metadata_to_json(metadata: &Metadata) -> serde_json::Value {
    serde_json::Value::Object(
        metadata
            .iter()
            .map(|(key, value)| (key.clone(), value.to_json()))
            .collect(),
    )
}

/// The metadata of a decoded descriptor: `None` when absent or empty, as
/// envoyproxy/ratelimit's `parseMetadata` returns nil for an empty map.
pub(crate) fn metadata_from_fields(fields: Option<&[(String, GoValue)]>) -> Option<Metadata> {
    let fields = fields.filter(|fields| !fields.is_empty())?;
    Some(
        fields
            .iter()
            .map(|(key, value)| (key.clone(), MetadataValue::from_go(value)))
            .collect(),
    )
}
