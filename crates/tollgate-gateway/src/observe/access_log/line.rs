//! One access-log line's fields, in their order, and how a line is written
//! as text (`name=value` pairs); the JSON form is serde's of [`Line`].

use http::Method;
use serde::Serialize;

use tollgate_core::Fingerprinter;

use super::Record;

/// One line's fields, in their order.
#[derive(Serialize)]
pub(super) struct Line<'a> {
    time: String,
    method: Option<&'a str>,
    path: Option<&'a str>,
    status: u16,
    route: Option<&'a str>,
    tier: Option<&'a str>,
    key: Option<String>,
    client: Option<&'a str>,
    decision: &'static str,
    policy: Option<&'a str>,
    remaining: Option<u64>,
    upstream_status: Option<u16>,
    duration_us: u64,
    wait_us: u64,
    bytes: u64,
}

impl<'a> Line<'a> {
    /// The line of `record`, its key shown by `fingerprints`.
    pub(super) fn of(record: &'a Record, fingerprints: &Fingerprinter) -> Self {
        let outcome = &record.outcome;
        let noted = outcome.noted();
        let tier = outcome.admission.decided().then(|| {
            outcome
                .tier
                .as_deref()
                .unwrap_or(tollgate_core::DEFAULT_TIER)
        });
        Line {
            time: humantime::format_rfc3339_micros(record.arrival.time).to_string(),
            method: record.arrival.method.as_ref().map(Method::as_str),
            path: record.arrival.path.as_deref(),
            status: record.status,
            route: outcome.route.as_deref(),
            tier,
            key: noted.key.map(|key| fingerprints.of(key).to_string()),
            client: noted.client,
            decision: outcome.admission.label(),
            policy: noted.bound.map(|(policy, _)| policy),
            remaining: noted.bound.and_then(|(_, remaining)| remaining),
            upstream_status: record.upstream_status,
            duration_us: u64::try_from(record.duration.as_micros()).unwrap_or(u64::MAX),
            wait_us: u64::try_from(outcome.waited.as_micros()).unwrap_or(u64::MAX),
            bytes: record.bytes,
        }
    }
}

/// `line` as text: `name=value` pairs in the JSON fields' order, `-` for
/// none, a value holding a space, a quote, `=`, a control character or
/// nothing (or that is `-`) written as a JSON string.
pub(super) fn text_line(out: &mut Vec<u8>, line: &Line<'_>) {
    let number = |value: Option<u64>| value.map_or_else(|| "-".to_owned(), |n| n.to_string());
    let texts = [
        ("time", Some(line.time.as_str())),
        ("method", line.method),
        ("path", line.path),
    ];
    let numbers = [
        (
            "upstream_status",
            number(line.upstream_status.map(u64::from)),
        ),
        ("duration_us", number(Some(line.duration_us))),
        ("wait_us", number(Some(line.wait_us))),
        ("bytes", number(Some(line.bytes))),
    ];
    let mut first = true;
    let mut pair = |out: &mut Vec<u8>, name: &str| {
        if !first {
            out.push(b' ');
        }
        first = false;
        out.extend_from_slice(name.as_bytes());
        out.push(b'=');
    };
    for (name, value) in texts {
        pair(out, name);
        write_text_value(out, value);
    }
    pair(out, "status");
    out.extend_from_slice(line.status.to_string().as_bytes());
    for (name, value) in [
        ("route", line.route),
        ("tier", line.tier),
        ("key", line.key.as_deref()),
        ("client", line.client),
        ("decision", Some(line.decision)),
        ("policy", line.policy),
    ] {
        pair(out, name);
        write_text_value(out, value);
    }
    pair(out, "remaining");
    out.extend_from_slice(number(line.remaining).as_bytes());
    for (name, value) in numbers {
        pair(out, name);
        out.extend_from_slice(value.as_bytes());
    }
    out.push(b'\n');
}

/// `value` bare when it can be, else as a JSON string; `-` for none.
fn write_text_value(out: &mut Vec<u8>, value: Option<&str>) {
    let Some(value) = value else {
        out.push(b'-');
        return;
    };
    let bare = !value.is_empty()
        && value != "-"
        && value
            .chars()
            .all(|c| !c.is_control() && !matches!(c, ' ' | '"' | '='));
    if bare {
        out.extend_from_slice(value.as_bytes());
    } else if serde_json::to_writer(&mut *out, value).is_err() {
        out.push(b'-');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_values_are_quoted_when_they_must_be() {
        let mut out = Vec::new();
        for value in ["orders", "my route", "a=b", "", "-", "say \"hi\""] {
            write_text_value(&mut out, Some(value));
            out.push(b'|');
        }
        assert_eq!(
            String::from_utf8(out.clone()).unwrap(),
            "orders|\"my route\"|\"a=b\"|\"\"|\"-\"|\"say \\\"hi\\\"\"|"
        );
        write_text_value(&mut out, None);
        assert_eq!(out.last(), Some(&b'-'));
    }
}
