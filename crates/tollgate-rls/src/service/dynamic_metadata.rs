//! `RESPONSE_DYNAMIC_METADATA`: the `dynamic_metadata` struct the Go service
//! answers (`ratelimitToMetadata` in src/service/ratelimit.go): `domain`,
//! `descriptors` (each its `entries` as `key=value`, its `limit` as protobuf
//! text, its `hitsAddend`), the request's `hitsAddend` when not 0, and
//! `metadata`, the merge of the passed descriptors' limits' metadata (the first
//! value of a field wins; structs merge field by field).

use super::held::Held;
use crate::config::metadata::{Metadata, MetadataValue};
use crate::proto::{RateLimitDescriptor, RateLimitRequest};

/// The dynamic metadata of `request`, given the indices of the descriptors
/// that passed and what each is held to.
pub(crate) fn dynamic_metadata(
    request: &RateLimitRequest,
    passed: &[usize],
    held: &[Held<'_>],
) -> Metadata {
    let mut fields = Metadata::new();
    fields.insert(
        "domain".to_owned(),
        MetadataValue::String(request.domain.clone()),
    );
    fields.insert(
        "descriptors".to_owned(),
        MetadataValue::List(
            request
                .descriptors
                .iter()
                .map(|d| MetadataValue::Struct(descriptor_struct(d)))
                .collect(),
        ),
    );
    if request.hits_addend != 0 {
        fields.insert(
            "hitsAddend".to_owned(),
            MetadataValue::Number(f64::from(request.hits_addend)),
        );
    }
    let mut merged = Metadata::new();
    for &index in passed {
        if let Some(metadata) = held.get(index).and_then(|held| held.metadata) {
            merge(&mut merged, metadata);
        }
    }
    if !merged.is_empty() {
        fields.insert("metadata".to_owned(), MetadataValue::Struct(merged));
    }
    fields
}

/// `descriptorToStruct`.
fn descriptor_struct(descriptor: &RateLimitDescriptor) -> Metadata {
    let mut fields = Metadata::new();
    fields.insert(
        "entries".to_owned(),
        MetadataValue::List(
            descriptor
                .entries
                .iter()
                .map(|e| MetadataValue::String(format!("{}={}", e.key, e.value)))
                .collect(),
        ),
    );
    if let Some(limit) = descriptor.limit {
        // Go's `descriptor.Limit.String()` (protobuf text, fields at their
        // default left out).
        let mut text = Vec::new();
        if limit.requests_per_unit != 0 {
            text.push(format!("requests_per_unit:{}", limit.requests_per_unit));
        }
        if limit.unit != crate::Unit::Unknown {
            text.push(format!("unit:{}", limit.unit.proto_name()));
        }
        fields.insert("limit".to_owned(), MetadataValue::String(text.join(" ")));
    }
    if let Some(hits) = descriptor.hits_addend {
        fields.insert("hitsAddend".to_owned(), MetadataValue::Number(hits as f64));
    }
    fields
}

/// `mergeMetadata`: fields of `source` missing from `target` are added;
/// where both hold a struct, they merge; otherwise `target` keeps its value.
fn merge(target: &mut Metadata, source: &Metadata) {
    for (key, value) in source {
        match (target.get_mut(key), value) {
            (Some(MetadataValue::Struct(inner)), MetadataValue::Struct(source)) => {
                merge(inner, source);
            }
            (Some(_), _) => {}
            (None, _) => {
                target.insert(key.clone(), value.clone());
            }
        }
    }
}
