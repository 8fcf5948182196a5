//! The `envoy-types` prost messages to and from the plain types of
//! [`crate::proto`]. Every conversion is total: any message that decodes
//! converts, and any response converts back.

use std::time::Duration;

use envoy_types::pb::envoy::config::core::v3 as core;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3 as common;
use envoy_types::pb::envoy::service::ratelimit::v3 as rls;
use envoy_types::pb::google::protobuf as pbtypes;

use crate::config::metadata::{Metadata, MetadataValue};
use crate::config::unit::Unit;
use crate::proto;

/// A decoded gRPC request as the service's request.
pub(crate) fn request_from_prost(request: rls::RateLimitRequest) -> proto::RateLimitRequest {
    proto::RateLimitRequest {
        domain: request.domain,
        descriptors: request
            .descriptors
            .into_iter()
            .map(descriptor_from_prost)
            .collect(),
        hits_addend: request.hits_addend,
    }
}

fn descriptor_from_prost(descriptor: common::RateLimitDescriptor) -> proto::RateLimitDescriptor {
    proto::RateLimitDescriptor {
        entries: descriptor
            .entries
            .into_iter()
            .map(|entry| proto::Entry {
                key: entry.key,
                value: entry.value,
            })
            .collect(),
        limit: descriptor.limit.map(|limit| proto::RateLimitOverride {
            requests_per_unit: limit.requests_per_unit,
            unit: Unit::from_proto_value(limit.unit),
        }),
        hits_addend: descriptor.hits_addend.map(|hits| hits.value),
        is_negative_hits: descriptor.is_negative_hits,
    }
}

/// The service's response as the gRPC message.
pub(crate) fn response_to_prost(response: proto::RateLimitResponse) -> rls::RateLimitResponse {
    rls::RateLimitResponse {
        overall_code: response.overall_code.proto_value(),
        statuses: response.statuses.into_iter().map(status_to_prost).collect(),
        response_headers_to_add: response
            .response_headers_to_add
            .into_iter()
            .map(header_to_prost)
            .collect(),
        request_headers_to_add: response
            .request_headers_to_add
            .into_iter()
            .map(header_to_prost)
            .collect(),
        raw_body: response.raw_body,
        dynamic_metadata: response
            .dynamic_metadata
            .map(|fields| struct_to_prost(&fields)),
        quota: response.quota.map(quota_to_prost),
    }
}

fn status_to_prost(status: proto::DescriptorStatus) -> rls::rate_limit_response::DescriptorStatus {
    rls::rate_limit_response::DescriptorStatus {
        code: status.code.proto_value(),
        current_limit: status
            .current_limit
            .map(|limit| rls::rate_limit_response::RateLimit {
                name: limit.name,
                requests_per_unit: limit.requests_per_unit,
                unit: limit.unit.proto_value(),
            }),
        limit_remaining: status.limit_remaining,
        duration_until_reset: status.duration_until_reset.map(duration_to_prost),
        quota: status.quota.map(quota_to_prost),
    }
}

fn duration_to_prost(duration: Duration) -> pbtypes::Duration {
    pbtypes::Duration {
        seconds: i64::try_from(duration.as_secs()).unwrap_or(i64::MAX),
        nanos: i32::try_from(duration.subsec_nanos()).unwrap_or(0),
    }
}

fn quota_to_prost(quota: proto::Quota) -> rls::rate_limit_response::Quota {
    rls::rate_limit_response::Quota {
        requests: quota.requests,
        id: quota.id,
        expiration_specifier: quota.valid_until.map(|until| {
            rls::rate_limit_response::quota::ExpirationSpecifier::ValidUntil(pbtypes::Timestamp {
                seconds: until.seconds,
                nanos: until.nanos,
            })
        }),
    }
}

fn header_to_prost(header: proto::HeaderValue) -> core::HeaderValue {
    core::HeaderValue {
        key: header.key,
        value: header.value,
        raw_value: header.raw_value,
    }
}

/// A metadata struct as `google.protobuf.Struct`.
pub(crate) fn struct_to_prost(fields: &Metadata) -> pbtypes::Struct {
    pbtypes::Struct {
        fields: fields
            .iter()
            .map(|(key, value)| (key.clone(), value_to_prost(value)))
            .collect(),
    }
}

fn value_to_prost(value: &MetadataValue) -> pbtypes::Value {
    use pbtypes::value::Kind;
    let kind = match value {
        MetadataValue::Null => Kind::NullValue(pbtypes::NullValue::NullValue as i32),
        MetadataValue::Bool(value) => Kind::BoolValue(*value),
        MetadataValue::Number(value) => Kind::NumberValue(*value),
        MetadataValue::String(value) => Kind::StringValue(value.clone()),
        MetadataValue::List(items) => Kind::ListValue(pbtypes::ListValue {
            values: items.iter().map(value_to_prost).collect(),
        }),
        MetadataValue::Struct(fields) => Kind::StructValue(struct_to_prost(fields)),
    };
    pbtypes::Value { kind: Some(kind) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_convert_field_by_field() {
        let request = rls::RateLimitRequest {
            domain: "edge".to_owned(),
            descriptors: vec![common::RateLimitDescriptor {
                entries: vec![common::rate_limit_descriptor::Entry {
                    key: "k".to_owned(),
                    value: "v".to_owned(),
                }],
                limit: Some(common::rate_limit_descriptor::RateLimitOverride {
                    requests_per_unit: 7,
                    unit: 42,
                }),
                hits_addend: Some(pbtypes::UInt64Value { value: 0 }),
                is_negative_hits: true,
            }],
            hits_addend: 3,
        };
        let plain = request_from_prost(request);
        assert_eq!(plain.domain, "edge");
        assert_eq!(plain.hits_addend, 3);
        let descriptor = &plain.descriptors[0];
        assert_eq!(descriptor.entries, vec![proto::Entry::new("k", "v")]);
        assert_eq!(
            descriptor.limit.map(|limit| limit.unit),
            Some(Unit::Unknown)
        );
        assert_eq!(descriptor.hits_addend, Some(0));
        assert!(descriptor.is_negative_hits);
    }

    #[test]
    fn responses_convert_field_by_field() {
        let mut metadata = Metadata::new();
        metadata.insert("n".to_owned(), MetadataValue::Number(1.5));
        metadata.insert(
            "l".to_owned(),
            MetadataValue::List(vec![MetadataValue::Null, MetadataValue::Bool(true)]),
        );
        let response = proto::RateLimitResponse {
            overall_code: proto::Code::OverLimit,
            statuses: vec![proto::DescriptorStatus {
                code: proto::Code::OverLimit,
                current_limit: Some(proto::CurrentLimit {
                    name: "n".to_owned(),
                    requests_per_unit: 5,
                    unit: Unit::Week,
                }),
                limit_remaining: 0,
                duration_until_reset: Some(Duration::from_millis(1500)),
                quota: None,
            }],
            response_headers_to_add: vec![proto::HeaderValue::new("RateLimit-Limit", "5")],
            dynamic_metadata: Some(metadata),
            ..proto::RateLimitResponse::default()
        };
        let message = response_to_prost(response);
        assert_eq!(message.overall_code, 2);
        let status = &message.statuses[0];
        assert_eq!(
            status.current_limit.as_ref().map(|limit| limit.unit),
            Some(7)
        );
        assert_eq!(
            status.duration_until_reset,
            Some(pbtypes::Duration {
                seconds: 1,
                nanos: 500_000_000
            })
        );
        assert_eq!(message.response_headers_to_add[0].key, "RateLimit-Limit");
        let fields = message.dynamic_metadata.unwrap().fields;
        assert_eq!(
            fields["n"].kind,
            Some(pbtypes::value::Kind::NumberValue(1.5))
        );
    }
}
