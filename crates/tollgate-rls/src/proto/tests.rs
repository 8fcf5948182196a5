//! The proto3 JSON mapping of the request and response types.

use std::time::Duration;

use serde_json::json;

use super::*;

#[test]
fn reads_both_spellings_and_proto3_scalars() {
    let request: RateLimitRequest = serde_json::from_value(json!({
        "domain": "d",
        "descriptors": [
            {"entries": [{"key": "k", "value": "v"}, {"key": "only"}],
             "limit": {"requests_per_unit": "5", "unit": "MINUTE"},
             "hitsAddend": "0"},
            {"entries": [{"key": "k"}], "hits_addend": 3, "limit": {"requestsPerUnit": 2, "unit": 3}},
            {"entries": null, "limit": null, "hitsAddend": null}
        ],
        "hits_addend": 1e0
    }))
    .unwrap();
    assert_eq!(request.hits_addend, 1);
    assert_eq!(request.descriptors[0].hits_addend, Some(0));
    assert_eq!(request.descriptors[0].entries[1], Entry::new("only", ""));
    assert_eq!(
        request.descriptors[0].limit,
        Some(RateLimitOverride {
            requests_per_unit: 5,
            unit: Unit::Minute
        })
    );
    assert_eq!(request.descriptors[1].hits_addend, Some(3));
    assert_eq!(request.descriptors[1].limit.unwrap().unit, Unit::Hour);
    assert_eq!(request.descriptors[2], RateLimitDescriptor::default());
    let written = serde_json::to_value(&request).unwrap();
    assert_eq!(written["hitsAddend"], json!(1));
    assert_eq!(written["descriptors"][0]["hitsAddend"], json!("0"));
    assert_eq!(
        written["descriptors"][0]["limit"],
        json!({"requestsPerUnit": 5, "unit": "MINUTE"})
    );
}

#[test]
fn refuses_what_protojson_refuses() {
    for bad in [
        json!({"domain": "d", "extra": 1}),
        json!({"domain": "d", "hitsAddend": -1}),
        json!({"domain": "d", "hitsAddend": 4_294_967_296u64}),
        json!({"domain": "d", "hitsAddend": 1.5}),
        json!({"descriptors": [{"entries": [{"key": "k", "val": "v"}]}]}),
        json!({"descriptors": [{"limit": {"unit": "FORTNIGHT"}}]}),
        json!({"domain": 5}),
    ] {
        assert!(
            serde_json::from_value::<RateLimitRequest>(bad.clone()).is_err(),
            "{bad}"
        );
    }
    let twice = r#"{"hitsAddend": 1, "hits_addend": 2}"#;
    assert!(serde_json::from_str::<RateLimitRequest>(twice).is_err());
}

#[test]
fn writes_the_response_as_protojson() {
    let response = RateLimitResponse {
        overall_code: Code::OverLimit,
        statuses: vec![
            DescriptorStatus {
                code: Code::OverLimit,
                current_limit: Some(CurrentLimit {
                    name: String::new(),
                    requests_per_unit: 10,
                    unit: Unit::Minute,
                }),
                limit_remaining: 0,
                duration_until_reset: Some(Duration::from_secs(58)),
                quota: None,
            },
            DescriptorStatus {
                code: Code::Ok,
                limit_remaining: u32::MAX,
                ..DescriptorStatus::default()
            },
        ],
        response_headers_to_add: vec![HeaderValue::new("RateLimit-Limit", "10")],
        raw_body: b"hi".to_vec(),
        quota: Some(Quota {
            requests: 3,
            valid_until: Some(Timestamp {
                seconds: 0,
                nanos: 0,
            }),
            id: String::new(),
        }),
        ..RateLimitResponse::default()
    };
    assert_eq!(
        serde_json::to_value(&response).unwrap(),
        json!({
            "overallCode": "OVER_LIMIT",
            "statuses": [
                {"code": "OVER_LIMIT", "currentLimit": {"requestsPerUnit": 10, "unit": "MINUTE"},
                 "durationUntilReset": "58s"},
                {"code": "OK", "limitRemaining": 4_294_967_295u32}
            ],
            "responseHeadersToAdd": [{"key": "RateLimit-Limit", "value": "10"}],
            "rawBody": "aGk=",
            "quota": {"requests": 3, "validUntil": "1970-01-01T00:00:00Z"}
        })
    );
}
