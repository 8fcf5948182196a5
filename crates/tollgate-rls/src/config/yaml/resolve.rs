//! Plain scalar resolution with gopkg.in/yaml.v2's (YAML 1.1) rules, which
//! envoyproxy/ratelimit uses: `yes`/`no`/`on`/`off` are booleans, integers are
//! read by Go's `strconv.ParseInt(s, 0, 64)` after removing `_` (so `010` is 8),
//! `YYYY-MM-DD` dates are timestamps. serde_yaml_ng resolves with YAML 1.2 rules,
//! so the loader resolves the text itself.

/// What yaml.v2's `resolve` makes of a scalar.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Resolved {
    /// `~`, `null`, `Null`, `NULL` or empty.
    Null,
    /// A YAML 1.1 boolean.
    Bool(bool),
    /// An integer that fits Go's `int` (64 bits).
    Int(i64),
    /// An integer above `i64::MAX` (Go's `uint64`).
    Uint(u64),
    /// A float (`1.5`, `1e3`, `.inf`, `08`).
    Float(f64),
    /// A date or date-time (yaml.v2 keeps its text when decoding into an
    /// interface or a string).
    Timestamp,
    /// Anything else: a string.
    Str,
}

impl Resolved {
    /// The short tag yaml.v2 prints in its type errors.
    pub(crate) fn short_tag(self) -> &'static str {
        match self {
            Resolved::Null => "!!null",
            Resolved::Bool(_) => "!!bool",
            Resolved::Int(_) | Resolved::Uint(_) => "!!int",
            Resolved::Float(_) => "!!float",
            Resolved::Timestamp => "!!timestamp",
            Resolved::Str => "!!str",
        }
    }
}

/// Resolves a plain scalar as yaml.v2 2.4's `resolve("", text)` does.
pub(crate) fn resolve_plain(text: &str) -> Resolved {
    match text {
        "y" | "Y" | "yes" | "Yes" | "YES" | "true" | "True" | "TRUE" | "on" | "On" | "ON" => {
            return Resolved::Bool(true);
        }
        "n" | "N" | "no" | "No" | "NO" | "false" | "False" | "FALSE" | "off" | "Off" | "OFF" => {
            return Resolved::Bool(false);
        }
        "" | "~" | "null" | "Null" | "NULL" => return Resolved::Null,
        ".nan" | ".NaN" | ".NAN" => return Resolved::Float(f64::NAN),
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => {
            return Resolved::Float(f64::INFINITY);
        }
        "-.inf" | "-.Inf" | "-.INF" => return Resolved::Float(f64::NEG_INFINITY),
        _ => {}
    }
    match text.as_bytes()[0] {
        b'.' => match parse_go_float(text) {
            Some(value) => Resolved::Float(value),
            None => Resolved::Str,
        },
        b'+' | b'-' | b'0'..=b'9' => resolve_number(text),
        _ => Resolved::Str,
    }
}

/// The digit-or-sign branch of yaml.v2's `resolve`.
fn resolve_number(text: &str) -> Resolved {
    if is_timestamp(text) {
        return Resolved::Timestamp;
    }
    let plain: String = text.chars().filter(|&c| c != '_').collect();
    if let Some(value) = parse_go_int(&plain) {
        return Resolved::Int(value);
    }
    if let Some(value) = parse_go_uint(&plain) {
        return Resolved::Uint(value);
    }
    if is_yaml_style_float(&plain)
        && let Some(value) = parse_go_float(&plain)
    {
        return Resolved::Float(value);
    }
    if let Some(digits) = plain.strip_prefix("0b") {
        if let Ok(value) = i64::from_str_radix(digits, 2) {
            return Resolved::Int(value);
        }
        if let Ok(value) = u64::from_str_radix(digits, 2) {
            return Resolved::Uint(value);
        }
    } else if let Some(digits) = plain.strip_prefix("-0b")
        && let Ok(value) = i64::from_str_radix(&format!("-{digits}"), 2)
    {
        return Resolved::Int(value);
    }
    Resolved::Str
}

/// Go's `strconv.ParseInt(s, 0, 64)`: an optional sign, then `0x`, `0o`, `0b`,
/// a leading `0` (octal) or decimal digits.
fn parse_go_int(text: &str) -> Option<i64> {
    let (negative, rest) = match text.as_bytes().first()? {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    let magnitude = parse_go_magnitude(rest)?;
    if negative {
        0i64.checked_sub_unsigned(magnitude)
    } else {
        i64::try_from(magnitude).ok()
    }
}

/// Go's `strconv.ParseUint(s, 0, 64)`: no sign allowed.
fn parse_go_uint(text: &str) -> Option<u64> {
    parse_go_magnitude(text)
}

/// The unsigned part of Go's base-0 integer syntax.
fn parse_go_magnitude(text: &str) -> Option<u64> {
    let (radix, digits) = if let Some(rest) = strip_prefix_ci(text, "0x") {
        (16, rest)
    } else if let Some(rest) = strip_prefix_ci(text, "0o") {
        (8, rest)
    } else if let Some(rest) = strip_prefix_ci(text, "0b") {
        (2, rest)
    } else if text.len() > 1 && text.starts_with('0') {
        (8, &text[1..])
    } else {
        (10, text)
    };
    if digits.is_empty() || !digits.bytes().all(|b| (b as char).is_digit(radix)) {
        return None;
    }
    u64::from_str_radix(digits, radix).ok()
}

fn strip_prefix_ci<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    let head = text.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &text[prefix.len()..])
}

/// yaml.v2's `yamlStyleFloat`: `^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`.
fn is_yaml_style_float(text: &str) -> bool {
    let bytes = text.as_bytes();
    let mut i = 0;
    if matches!(bytes.first(), Some(b'+' | b'-')) {
        i += 1;
    }
    let digits = |i: &mut usize| {
        let start = *i;
        while bytes.get(*i).is_some_and(u8::is_ascii_digit) {
            *i += 1;
        }
        *i - start
    };
    if bytes.get(i) == Some(&b'.') {
        i += 1;
        if digits(&mut i) == 0 {
            return false;
        }
    } else {
        if digits(&mut i) == 0 {
            return false;
        }
        if bytes.get(i) == Some(&b'.') {
            i += 1;
            digits(&mut i);
        }
    }
    if matches!(bytes.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(bytes.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        if digits(&mut i) == 0 {
            return false;
        }
    }
    i == bytes.len()
}

/// Go's `strconv.ParseFloat(s, 64)` for the decimal forms yaml.v2 reaches.
fn parse_go_float(text: &str) -> Option<f64> {
    let valid = text
        .bytes()
        .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-'));
    if !valid {
        return None;
    }
    text.parse::<f64>().ok()
}

/// yaml.v2's `parseTimestamp`: four digits and `-`, then one of the layouts
/// `2006-1-2`, `2006-1-2 15:4:5.999999999`, `2006-1-2T15:4:5.999999999Z07:00`
/// (checked here by shape, not by calendar).
fn is_timestamp(text: &str) -> bool {
    let bytes = text.as_bytes();
    if bytes.len() < 5 || !bytes[..4].iter().all(u8::is_ascii_digit) || bytes[4] != b'-' {
        return false;
    }
    let rest = &text[5..];
    let (date, time) = match rest.find(['T', 't', ' ']) {
        Some(at) => (&rest[..at], Some(&rest[at + 1..])),
        None => (rest, None),
    };
    let mut date_parts = date.split('-');
    let month_ok = date_parts.next().is_some_and(|m| is_number_in(m, 1, 12));
    let day_ok = date_parts.next().is_some_and(|d| is_number_in(d, 1, 31));
    if !month_ok || !day_ok || date_parts.next().is_some() {
        return false;
    }
    match time {
        None => true,
        Some(time) => {
            let clock = time.split(['Z', '+', '-']).next().unwrap_or("");
            let mut fields = clock.split(':');
            let hour = fields.next().is_some_and(|h| is_number_in(h, 0, 23));
            let minute = fields.next().is_some_and(|m| is_number_in(m, 0, 59));
            let second = fields.next().is_some_and(|s| {
                let whole = s.split('.').next().unwrap_or("");
                is_number_in(whole, 0, 59)
            });
            hour && minute && second && fields.next().is_none()
        }
    }
}

fn is_number_in(text: &str, low: u32, high: u32) -> bool {
    (1..=2).contains(&text.len())
        && text.bytes().all(|b| b.is_ascii_digit())
        && text.parse::<u32>().is_ok_and(|n| (low..=high).contains(&n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_like_yaml_v2() {
        assert_eq!(resolve_plain("yes"), Resolved::Bool(true));
        assert_eq!(resolve_plain("Off"), Resolved::Bool(false));
        assert_eq!(resolve_plain("~"), Resolved::Null);
        assert_eq!(resolve_plain("010"), Resolved::Int(8));
        assert_eq!(resolve_plain("1_000"), Resolved::Int(1000));
        assert_eq!(resolve_plain("0x1F"), Resolved::Int(31));
        assert_eq!(resolve_plain("-5"), Resolved::Int(-5));
        assert_eq!(resolve_plain("08"), Resolved::Float(8.0));
        assert_eq!(resolve_plain("0.25"), Resolved::Float(0.25));
        assert_eq!(resolve_plain(".5"), Resolved::Float(0.5));
        assert_eq!(
            resolve_plain("18446744073709551615"),
            Resolved::Uint(u64::MAX)
        );
        assert_eq!(resolve_plain("2001-12-14"), Resolved::Timestamp);
        assert_eq!(resolve_plain("2001-12-14 21:59:43.10"), Resolved::Timestamp);
        assert_eq!(resolve_plain("1.2.3.4"), Resolved::Str);
        assert_eq!(resolve_plain("foo"), Resolved::Str);
        assert_eq!(resolve_plain("-"), Resolved::Str);
        assert_eq!(resolve_plain("<<"), Resolved::Str);
    }
}
