//! Envoy's JSON access log (`json_format`): one JSON object per line.

use serde_json::Value;

use super::rfc3339;
use crate::line::{LogLine, key_of};

pub(super) fn parse(line: &str, key_field: &str) -> Result<LogLine, String> {
    let json: Value =
        serde_json::from_str(line).map_err(|error| format!("not a JSON line: {error}"))?;
    let text = |name: &str| json.get(name).and_then(Value::as_str);
    let time = text("start_time")
        .and_then(rfc3339)
        .ok_or("no RFC 3339 start_time")?;
    let path = [
        "path",
        ":path",
        "x-envoy-original-path",
        "x_envoy_original_path",
    ]
    .iter()
    .find_map(|name| text(name))
    .map(|target| target.split('?').next().unwrap_or(target).to_owned());
    let client = text("downstream_remote_address").map(|address| {
        // `1.2.3.4:5678` or `[2001:db8::1]:5678`: the address alone.
        match address.rsplit_once(':') {
            Some((host, port)) if port.bytes().all(|b| b.is_ascii_digit()) => host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_owned(),
            _ => address.to_owned(),
        }
    });
    Ok(LogLine {
        time,
        path,
        key: text(key_field).and_then(key_of),
        client,
        ..LogLine::default()
    })
}
