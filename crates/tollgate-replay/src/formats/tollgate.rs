//! tollgate's own access log: JSON objects, or text `name=value` pairs whose
//! values are bare or JSON strings, `-` for none.

use serde::Deserialize;

use super::rfc3339;
use crate::line::{LogLine, Logged};

#[derive(Deserialize)]
struct JsonLine<'a> {
    #[serde(borrow)]
    time: std::borrow::Cow<'a, str>,
    #[serde(default, borrow)]
    path: Option<std::borrow::Cow<'a, str>>,
    #[serde(default, borrow)]
    route: Option<std::borrow::Cow<'a, str>>,
    #[serde(default, borrow)]
    tier: Option<std::borrow::Cow<'a, str>>,
    #[serde(default, borrow)]
    key: Option<std::borrow::Cow<'a, str>>,
    #[serde(default, borrow)]
    client: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow)]
    decision: std::borrow::Cow<'a, str>,
}

pub(super) fn parse(line: &str) -> Result<LogLine, String> {
    if line.trim_start().starts_with('{') {
        let json: JsonLine<'_> = serde_json::from_str(line)
            .map_err(|error| format!("not a tollgate JSON line: {error}"))?;
        return Ok(LogLine {
            time: rfc3339(&json.time).ok_or("its time is not RFC 3339")?,
            route: json.route.map(Into::into),
            path: json.path.map(Into::into),
            key: json.key.map(Into::into),
            client: json.client.map(Into::into),
            tier: json.tier.map(Into::into),
            logged: Some(
                Logged::of(&json.decision).ok_or("its decision is not one tollgate logs")?,
            ),
        });
    }
    let mut parsed = LogLine::default();
    let mut time = None;
    let mut decision = None;
    let mut rest = line.trim();
    while !rest.is_empty() {
        let (name, after) = rest
            .split_once('=')
            .ok_or("not a tollgate line: a field without `=`")?;
        let (value, after) = text_value(after)?;
        rest = after.trim_start();
        match name {
            "time" => time = value.as_deref().and_then(rfc3339),
            "path" => parsed.path = value,
            "route" => parsed.route = value,
            "tier" => parsed.tier = value,
            "key" => parsed.key = value,
            "client" => parsed.client = value,
            "decision" => decision = value,
            _ => {}
        }
    }
    parsed.time = time.ok_or("no RFC 3339 time")?;
    parsed.logged = Some(
        decision
            .as_deref()
            .and_then(Logged::of)
            .ok_or("no decision tollgate logs")?,
    );
    Ok(parsed)
}

/// A text value at the start of `text`: a JSON string, or bare up to the
/// next space; `-` is none. Returns it and what follows.
fn text_value(text: &str) -> Result<(Option<String>, &str), String> {
    if text.starts_with('"') {
        let mut stream = serde_json::Deserializer::from_str(text).into_iter::<String>();
        let value = stream
            .next()
            .ok_or("a quoted value does not end")?
            .map_err(|error| format!("a quoted value: {error}"))?;
        let used = stream.byte_offset();
        return Ok((Some(value), &text[used..]));
    }
    let end = text.find(' ').unwrap_or(text.len());
    let value = &text[..end];
    Ok(((value != "-").then(|| value.to_owned()), &text[end..]))
}
