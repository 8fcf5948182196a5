//! nginx's `combined` log format: `$remote_addr - $remote_user
//! [$time_local] "$request" $status $body_bytes_sent "$http_referer"
//! "$http_user_agent"`, and any fields a `log_format` appends after it.

use crate::line::{LogLine, key_of};

/// Which field of a `combined` line holds the API key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NginxKey {
    /// `$remote_user` (HTTP basic authentication's user).
    RemoteUser,
    /// The `n`-th field after the user agent, from 1: a `log_format` that
    /// appends `"$http_x_api_key"` or `"$http_authorization"` (`Bearer X`
    /// gives `X`).
    Appended(usize),
}

impl NginxKey {
    /// `remote_user` or `field:N`.
    ///
    /// # Errors
    ///
    /// A message naming the two forms.
    pub fn parse(text: &str) -> Result<NginxKey, String> {
        if text == "remote_user" {
            return Ok(NginxKey::RemoteUser);
        }
        text.strip_prefix("field:")
            .and_then(|n| n.parse::<usize>().ok())
            .filter(|n| (1..=100).contains(n))
            .map(NginxKey::Appended)
            .ok_or_else(|| {
                format!(
                    "--key-field {text:?}: for nginx, remote_user or field:N (the N-th field after \
                     the user agent, from 1 to 100)"
                )
            })
    }
}

pub(super) fn parse(line: &str, key: &NginxKey) -> Result<LogLine, String> {
    let fields = fields(line)?;
    if fields.len() < 9 {
        return Err(format!(
            "not an nginx combined line: {} fields, not 9",
            fields.len()
        ));
    }
    let time = time_local(fields[3]).ok_or("its [$time_local] cannot be read")?;
    let path = fields[4]
        .split(' ')
        .nth(1)
        .map(|target| target.split('?').next().unwrap_or(target).to_owned());
    let key = match key {
        NginxKey::RemoteUser => key_of(fields[2]),
        NginxKey::Appended(n) => fields
            .get(8usize.saturating_add(*n))
            .and_then(|value| key_of(value)),
    };
    Ok(LogLine {
        time,
        path,
        key,
        client: Some(fields[0].to_owned()),
        ..LogLine::default()
    })
}

/// The fields of a line: bare words, `[...]` and `"..."` (with `\"` inside)
/// each one field, without their brackets or quotes.
fn fields(line: &str) -> Result<Vec<&str>, String> {
    let mut fields = Vec::with_capacity(12);
    let mut rest = line.trim();
    while !rest.is_empty() {
        let (field, after) = if let Some(inner) = rest.strip_prefix('[') {
            let end = inner.find(']').ok_or("a `[` without its `]`")?;
            (&inner[..end], &inner[end + 1..])
        } else if let Some(inner) = rest.strip_prefix('"') {
            let bytes = inner.as_bytes();
            let mut end = None;
            let mut index = 0;
            while index < bytes.len() {
                match bytes[index] {
                    b'\\' => index += 2,
                    b'"' => {
                        end = Some(index);
                        break;
                    }
                    _ => index += 1,
                }
            }
            let end = end.ok_or("a `\"` without its closing one")?;
            (&inner[..end], &inner[end + 1..])
        } else {
            let end = rest.find(' ').unwrap_or(rest.len());
            (&rest[..end], &rest[end..])
        };
        fields.push(field);
        rest = after.trim_start();
    }
    Ok(fields)
}

/// `10/Oct/2000:13:55:36 -0700` in nanoseconds since the epoch.
fn time_local(text: &str) -> Option<u64> {
    let (date_time, zone) = text.split_once(' ')?;
    let mut parts = date_time.splitn(4, [':', '/']);
    let day = digits(parts.next()?, 2)?;
    let month = match parts.next()? {
        "Jan" => 1,
        "Feb" => 2,
        "Mar" => 3,
        "Apr" => 4,
        "May" => 5,
        "Jun" => 6,
        "Jul" => 7,
        "Aug" => 8,
        "Sep" => 9,
        "Oct" => 10,
        "Nov" => 11,
        "Dec" => 12,
        _ => return None,
    };
    let year = digits(parts.next()?, 4)?;
    let mut clock = parts.next()?.split(':');
    let hour = digits(clock.next()?, 2)?;
    let minute = digits(clock.next()?, 2)?;
    let second = digits(clock.next()?, 2)?;
    let sign = match zone.as_bytes().first()? {
        b'+' => 1,
        b'-' => -1,
        _ => return None,
    };
    let zone_hours = digits(zone.get(1..3)?, 2)?;
    let zone_minutes = digits(zone.get(3..5)?, 2)?;
    if !(1..=31).contains(&day) || year == 0 || hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    let seconds = days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second
        - sign * (zone_hours * 3600 + zone_minutes * 60);
    u64::try_from(seconds).ok()?.checked_mul(1_000_000_000)
}

/// `text` as a number of at most `most` decimal digits (no sign).
fn digits(text: &str, most: usize) -> Option<i64> {
    if text.is_empty() || text.len() > most || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// Days from 1970-01-01 to the given date of the proleptic Gregorian
/// calendar (Howard Hinnant's `days_from_civil`).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let month_index = (month + 9) % 12;
    let day_of_year = (153 * month_index + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_local_time_counts_from_the_epoch_in_utc() {
        // 2000-10-10T20:55:36Z (13:55:36 at -0700) is 971211336 s after the
        // epoch (`date -d 2000-10-10T20:55:36Z +%s`).
        assert_eq!(
            time_local("10/Oct/2000:13:55:36 -0700"),
            Some(971_211_336_000_000_000)
        );
        assert_eq!(time_local("01/Jan/1970:00:00:00 +0000"), Some(0));
        assert_eq!(
            time_local("29/Feb/2024:23:59:59 +0000"),
            Some(1_709_251_199_000_000_000)
        );
        assert_eq!(time_local("10/Foo/2000:13:55:36 -0700"), None);
        assert_eq!(time_local("nonsense"), None);
        // A year past four digits, a sign, or a day out of range: no time.
        assert_eq!(time_local("01/Jan/99999999999999:00:00:00 +0000"), None);
        assert_eq!(time_local("01/Jan/2024:-1:00:00 +0000"), None);
        assert_eq!(time_local("32/Jan/2024:00:00:00 +0000"), None);
        assert_eq!(time_local("01/Jan/2024:00:00:00 +0a00"), None);
    }
}
