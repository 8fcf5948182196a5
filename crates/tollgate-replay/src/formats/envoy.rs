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
    let client = text("downstream_remote_address").map(address_without_port);
    Ok(LogLine {
        time,
        path,
        key: text(key_field).and_then(key_of),
        client,
        ..LogLine::default()
    })
}

/// `1.2.3.4:5678` or `[2001:db8::1]:5678` without the port; an address
/// without one (`2001:db8::1`, `1.2.3.4`) as it is.
fn address_without_port(address: &str) -> String {
    if let Some(rest) = address.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest).to_owned();
    }
    match address.split_once(':') {
        Some((host, port)) if !port.contains(':') && port.bytes().all(|b| b.is_ascii_digit()) => {
            host.to_owned()
        }
        _ => address.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_port_is_cut_and_nothing_else() {
        assert_eq!(address_without_port("10.0.0.1:5555"), "10.0.0.1");
        assert_eq!(address_without_port("[2001:db8::1]:5555"), "2001:db8::1");
        assert_eq!(address_without_port("2001:db8::1"), "2001:db8::1");
        assert_eq!(address_without_port("10.0.0.1"), "10.0.0.1");
    }
}
