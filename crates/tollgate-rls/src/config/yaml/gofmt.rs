//! Go's `fmt` `%v` text of decoded YAML values, which envoyproxy/ratelimit's
//! validation errors print (`key is not of type string: 0.25`, `list of type
//! other than map: a`).

use std::cmp::Ordering;

use super::go_value::GoValue;

/// `fmt.Sprintf("%v", value)`: maps print as `map[k:v ...]` with their keys
/// sorted (as Go's `fmt` sorts them), sequences as `[a b]`, `nil` as `<nil>`.
pub(crate) fn format_v(value: &GoValue) -> String {
    match value {
        GoValue::Nil => "<nil>".to_owned(),
        GoValue::Bool(value) => value.to_string(),
        GoValue::Int(value) => value.to_string(),
        GoValue::Uint(value) => value.to_string(),
        GoValue::Float(value) => format_float(*value),
        GoValue::Str(value) => value.clone(),
        GoValue::Seq(items) => {
            let items: Vec<String> = items.iter().map(format_v).collect();
            format!("[{}]", items.join(" "))
        }
        GoValue::Map(entries) => {
            let mut sorted: Vec<&(GoValue, GoValue)> = entries.iter().collect();
            sorted.sort_by(|a, b| compare_keys(&a.0, &b.0));
            let entries: Vec<String> = sorted
                .iter()
                .map(|(key, value)| format!("{}:{}", format_v(key), format_v(value)))
                .collect();
            format!("map[{}]", entries.join(" "))
        }
    }
}

/// Go's `%v` of a `float64`: `strconv.FormatFloat(f, 'g', -1, 64)`, the
/// shortest digits, in exponent form (`1e+06`) when the decimal exponent is
/// below -4 or at least 6, as `%g` with the shortest precision does.
pub(crate) fn format_float(value: f64) -> String {
    if value.is_nan() {
        return "NaN".to_owned();
    }
    if value.is_infinite() {
        return if value > 0.0 { "+Inf" } else { "-Inf" }.to_owned();
    }
    if value == 0.0 {
        return if value.is_sign_negative() { "-0" } else { "0" }.to_owned();
    }
    // Rust's `{:e}` prints the shortest digits that read back the same value.
    let text = format!("{value:e}");
    let (mantissa, exponent) = text.split_once('e').unwrap_or((&text, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(rest) => ("-", rest),
        None => ("", mantissa),
    };
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    if !(-4..6).contains(&exponent) {
        let (first, rest) = digits.split_at(1);
        let fraction = if rest.is_empty() {
            String::new()
        } else {
            format!(".{rest}")
        };
        let exponent_sign = if exponent < 0 { '-' } else { '+' };
        return format!(
            "{sign}{first}{fraction}e{exponent_sign}{:02}",
            exponent.unsigned_abs()
        );
    }
    let point = exponent + 1;
    if point <= 0 {
        let zeros = "0".repeat(point.unsigned_abs() as usize);
        format!("{sign}0.{zeros}{digits}")
    } else {
        let point = point as usize;
        if digits.len() <= point {
            format!("{sign}{digits}{}", "0".repeat(point - digits.len()))
        } else {
            format!("{sign}{}.{}", &digits[..point], &digits[point..])
        }
    }
}

/// An order for map keys of mixed types (Go orders them by type, then value).
fn compare_keys(a: &GoValue, b: &GoValue) -> Ordering {
    fn rank(value: &GoValue) -> u8 {
        match value {
            GoValue::Nil => 0,
            GoValue::Bool(_) => 1,
            GoValue::Int(_) => 2,
            GoValue::Uint(_) => 3,
            GoValue::Float(_) => 4,
            GoValue::Str(_) => 5,
            GoValue::Seq(_) => 6,
            GoValue::Map(_) => 7,
        }
    }
    match (a, b) {
        (GoValue::Bool(a), GoValue::Bool(b)) => a.cmp(b),
        (GoValue::Int(a), GoValue::Int(b)) => a.cmp(b),
        (GoValue::Uint(a), GoValue::Uint(b)) => a.cmp(b),
        (GoValue::Float(a), GoValue::Float(b)) => a.total_cmp(b),
        (GoValue::Str(a), GoValue::Str(b)) => a.cmp(b),
        _ => rank(a).cmp(&rank(b)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_print_as_go_does() {
        assert_eq!(format_float(0.25), "0.25");
        assert_eq!(format_float(100000.0), "100000");
        assert_eq!(format_float(1e6), "1e+06");
        assert_eq!(format_float(1.5e-5), "1.5e-05");
        assert_eq!(format_float(0.0001), "0.0001");
        assert_eq!(format_float(-2.5), "-2.5");
        assert_eq!(format_float(f64::INFINITY), "+Inf");
    }

    #[test]
    fn collections_print_as_go_does() {
        let value = GoValue::Map(vec![
            (GoValue::Str("b".into()), GoValue::Int(2)),
            (
                GoValue::Str("a".into()),
                GoValue::Seq(vec![GoValue::Nil, GoValue::Bool(true)]),
            ),
        ]);
        assert_eq!(format_v(&value), "map[a:[<nil> true] b:2]");
    }
}
