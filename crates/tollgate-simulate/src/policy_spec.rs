//! A policy written on the command line: `[NAME=]ALGORITHM:LIMIT/WINDOW[,burst=N]`,
//! as `free=token_bucket:100/1m,burst=20` or `sliding_log:5/10s`. The
//! window is a whole number of seconds (`60s`, `1m`, `1h`, `s`); the
//! policy is core's, checked as a configuration's is.

use tollgate_core::{Algorithm, Policy};

use crate::run::NamedPolicy;

/// Reads a policy's text.
///
/// # Errors
///
/// A message naming what is wrong: the form, the algorithm, a count, the
/// window, or core's own check of the policy (`burst` on an algorithm other
/// than the token bucket, a count past 2^63-1).
pub fn parse_policy(text: &str) -> Result<NamedPolicy, String> {
    let invalid = |reason: &str| {
        format!(
            "invalid policy {text:?}: {reason} (expected [NAME=]ALGORITHM:LIMIT/WINDOW[,burst=N], \
             as token_bucket:100/1m,burst=20)"
        )
    };
    let (name, rest) = match text.split_once('=') {
        Some((name, rest)) if !name.contains(':') => (Some(name.trim()), rest),
        _ => (None, text),
    };
    let (algorithm, rest) = rest
        .split_once(':')
        .ok_or_else(|| invalid("no algorithm before `:`"))?;
    let algorithm = match algorithm.trim() {
        "fixed_window" => Algorithm::FixedWindow,
        "sliding_log" => Algorithm::SlidingLog,
        "token_bucket" => Algorithm::TokenBucket,
        _ => {
            return Err(invalid(
                "the algorithm is fixed_window, sliding_log or token_bucket",
            ));
        }
    };
    let (rate, burst) = match rest.split_once(',') {
        Some((rate, burst)) => {
            let burst = burst
                .trim()
                .strip_prefix("burst=")
                .and_then(|burst| burst.parse::<u64>().ok())
                .ok_or_else(|| invalid("expected burst=N after the rate"))?;
            (rate, Some(burst))
        }
        None => (rest, None),
    };
    let (limit, window) = rate
        .split_once('/')
        .ok_or_else(|| invalid("expected LIMIT/WINDOW"))?;
    let limit: u64 = limit
        .trim()
        .parse()
        .map_err(|_| invalid("the limit is not a whole number"))?;
    let window = window.trim();
    let window = if window.starts_with(|c: char| c.is_ascii_digit()) {
        humantime::parse_duration(window)
    } else {
        humantime::parse_duration(&format!("1{window}"))
    }
    .map_err(|_| invalid("the window is not a span such as 60s or 1m"))?;
    if window.subsec_nanos() != 0 || window.is_zero() {
        return Err(invalid(
            "the window is a whole number of seconds, at least 1",
        ));
    }
    let policy = Policy::new(algorithm, limit, window.as_secs(), burst)
        .map_err(|error| invalid(&error.to_string()))?;
    let name = match name {
        Some(name) if !name.is_empty() => name.to_owned(),
        Some(_) => return Err(invalid("the name before `=` is empty")),
        None => text.trim().to_owned(),
    };
    Ok(NamedPolicy { name, policy })
}
