//! Response headers: the Go service's three limit headers
//! (`LIMIT_RESPONSE_HEADERS_ENABLED`), and tollgate's `Retry-After` and IETF
//! `RateLimit-Policy` / `RateLimit` fields (extensions, off by default).

use super::aggregate::Held;
use super::cache::Checked;
use super::settings::ServiceSettings;
use crate::proto::{DescriptorStatus, HeaderValue};

/// `RateLimit-Limit`, `RateLimit-Remaining` and `RateLimit-Reset` (or the
/// names configured) of `status`: its `requests_per_unit`, its
/// `limit_remaining` and `unit - now % unit` seconds (`CalculateReset`; for a
/// window that is not a unit, the status's own reset).
pub(crate) fn go_limit_headers(
    status: &DescriptorStatus,
    settings: &ServiceSettings,
    now_s: u64,
) -> [HeaderValue; 3] {
    let limit = status.current_limit.clone().unwrap_or_default();
    let reset = match limit.unit.seconds() {
        Some(unit) => unit - now_s % unit,
        None => status.duration_until_reset.map_or(0, |d| d.as_secs()),
    };
    [
        HeaderValue::new(
            &settings.limit_limit_header,
            limit.requests_per_unit.to_string(),
        ),
        HeaderValue::new(
            &settings.limit_remaining_header,
            status.limit_remaining.to_string(),
        ),
        HeaderValue::new(&settings.limit_reset_header, reset.to_string()),
    ]
}

/// Extension: `Retry-After` of an OVER_LIMIT answer: the longest wait of the
/// descriptors over their limit (none when no status says how long).
pub(crate) fn retry_after(checked: &[Checked]) -> Option<HeaderValue> {
    checked
        .iter()
        .filter(|one| one.status.code == crate::proto::Code::OverLimit)
        .filter_map(|one| one.retry_after_s)
        .max()
        .map(|seconds| HeaderValue::new("Retry-After", seconds.max(1).to_string()))
}

/// Extension: `RateLimit-Policy: "name";q=<limit>;w=<window>` and
/// `RateLimit: "name";r=<remaining>;t=<reset>` of every limited descriptor,
/// in order, as lists (nothing when no descriptor is limited).
pub(crate) fn ietf_fields(checked: &[Checked], held: &[Held<'_>]) -> Vec<HeaderValue> {
    let mut policies = Vec::new();
    let mut states = Vec::new();
    for (one, held) in checked.iter().zip(held) {
        let (Some(limit), Some(window_s), Some(name)) = (
            one.status.current_limit.as_ref(),
            one.window_s,
            held.policy_name,
        ) else {
            continue;
        };
        if held.unlimited {
            continue;
        }
        let name = sf_string(name);
        policies.push(format!("{name};q={};w={window_s}", limit.requests_per_unit));
        let reset = one.status.duration_until_reset.map_or(0, |d| d.as_secs());
        states.push(format!("{name};r={};t={reset}", one.status.limit_remaining));
    }
    if policies.is_empty() {
        return Vec::new();
    }
    vec![
        HeaderValue::new("RateLimit-Policy", policies.join(", ")),
        HeaderValue::new("RateLimit", states.join(", ")),
    ]
}

/// `text` as a structured-field string (RFC 8941): quoted, `"` and `\`
/// escaped, anything outside printable ASCII replaced by `_`.
fn sf_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            ' '..='~' => out.push(c),
            _ => out.push('_'),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn structured_field_strings() {
        assert_eq!(sf_string("a\"b\\c"), "\"a\\\"b\\\\c\"");
        assert_eq!(sf_string("é\n"), "\"__\"");
    }
}
