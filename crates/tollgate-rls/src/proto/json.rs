//! The pieces of the proto3 JSON mapping (as Go's `protojson` reads and writes
//! it) that serde does not do by itself: integers given as numbers or strings,
//! 64-bit integers written as strings, enums by name or number, `null` for an
//! absent field, durations (`"12s"`), timestamps (RFC 3339) and bytes (base64).

use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serializer};

/// Reads an unsigned integer of at most `max` from a JSON number (an integer,
/// or a float with no fraction such as `1e2`) or a string holding one, as
/// `protojson` does; `null` reads as 0.
struct UintVisitor {
    max: u64,
}

impl UintVisitor {
    fn check<E: de::Error>(&self, value: u64) -> Result<u64, E> {
        if value > self.max {
            return Err(E::custom(format!(
                "invalid value for unsigned integer field: {value} is above {}",
                self.max
            )));
        }
        Ok(value)
    }
}

impl<'de> Visitor<'de> for UintVisitor {
    type Value = u64;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "an unsigned integer up to {} (number or string)",
            self.max
        )
    }

    fn visit_u64<E: de::Error>(self, value: u64) -> Result<u64, E> {
        self.check(value)
    }

    fn visit_i64<E: de::Error>(self, value: i64) -> Result<u64, E> {
        let value = u64::try_from(value)
            .map_err(|_| E::custom(format!("invalid value for unsigned integer field: {value}")))?;
        self.check(value)
    }

    fn visit_f64<E: de::Error>(self, value: f64) -> Result<u64, E> {
        // 2^64 as a float: every float below it fits in a u64.
        const LIMIT: f64 = 18_446_744_073_709_551_616.0;
        if value.fract() != 0.0 || !(0.0..LIMIT).contains(&value) {
            return Err(E::custom(format!(
                "invalid value for unsigned integer field: {value}"
            )));
        }
        self.check(value as u64)
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<u64, E> {
        if let Ok(value) = text.parse::<u64>() {
            return self.check(value);
        }
        match text.parse::<f64>() {
            Ok(value)
                if text
                    .bytes()
                    .all(|b| b.is_ascii_digit() || b"eE+-.".contains(&b)) =>
            {
                self.visit_f64(value)
            }
            _ => Err(E::custom(format!(
                "invalid value for unsigned integer field: {text:?}"
            ))),
        }
    }

    fn visit_unit<E: de::Error>(self) -> Result<u64, E> {
        Ok(0)
    }
}

/// A `uint32` field.
pub(crate) fn de_u32<'de, D: Deserializer<'de>>(deserializer: D) -> Result<u32, D::Error> {
    let value = deserializer.deserialize_any(UintVisitor {
        max: u64::from(u32::MAX),
    })?;
    Ok(u32::try_from(value).unwrap_or(u32::MAX))
}

/// A `google.protobuf.UInt64Value` field: a number or string, `null` = absent.
pub(crate) fn de_opt_u64<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<u64>, D::Error> {
    struct OptionVisitor;
    impl<'de> Visitor<'de> for OptionVisitor {
        type Value = Option<u64>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("an unsigned 64-bit integer (number or string) or null")
        }
        fn visit_none<E: de::Error>(self) -> Result<Option<u64>, E> {
            Ok(None)
        }
        fn visit_unit<E: de::Error>(self) -> Result<Option<u64>, E> {
            Ok(None)
        }
        fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Option<u64>, D::Error> {
            d.deserialize_any(UintVisitor { max: u64::MAX }).map(Some)
        }
    }
    deserializer.deserialize_option(OptionVisitor)
}

/// A field whose JSON `null` means its default (strings, bools, lists,
/// messages).
pub(crate) fn de_null_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// A proto enum: its names and numbers.
pub(crate) trait ProtoEnum: Sized {
    /// The value of a name, exact case.
    fn from_name(name: &str) -> Option<Self>;
    /// The value of a number (unknown numbers map to the zero value, as the
    /// Rust side has no room for them).
    fn from_number(number: i32) -> Self;
}

/// An enum field: its name or its number; `null` is the default.
pub(crate) fn de_enum<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: ProtoEnum,
{
    struct EnumVisitor<T>(PhantomData<T>);
    impl<'de, T: ProtoEnum> Visitor<'de> for EnumVisitor<T> {
        type Value = T;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("an enum name or number")
        }
        fn visit_str<E: de::Error>(self, name: &str) -> Result<T, E> {
            T::from_name(name).ok_or_else(|| E::custom(format!("invalid value for enum: {name:?}")))
        }
        fn visit_i64<E: de::Error>(self, value: i64) -> Result<T, E> {
            let number = i32::try_from(value)
                .map_err(|_| E::custom(format!("invalid value for enum: {value}")))?;
            Ok(T::from_number(number))
        }
        fn visit_u64<E: de::Error>(self, value: u64) -> Result<T, E> {
            let number = i32::try_from(value)
                .map_err(|_| E::custom(format!("invalid value for enum: {value}")))?;
            Ok(T::from_number(number))
        }
        fn visit_f64<E: de::Error>(self, value: f64) -> Result<T, E> {
            if value.fract() != 0.0 || value < f64::from(i32::MIN) || value > f64::from(i32::MAX) {
                return Err(E::custom(format!("invalid value for enum: {value}")));
            }
            Ok(T::from_number(value as i32))
        }
        fn visit_unit<E: de::Error>(self) -> Result<T, E> {
            Ok(T::from_number(0))
        }
    }
    deserializer.deserialize_any(EnumVisitor(PhantomData))
}

/// An optional `UInt64Value` written as a decimal string.
pub(crate) fn ser_opt_u64_string<S: Serializer>(
    value: &Option<u64>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    match value {
        Some(value) => serializer.collect_str(value),
        None => serializer.serialize_none(),
    }
}

/// A `google.protobuf.Duration` as proto3 JSON text: seconds with 0, 3, 6 or 9
/// fractional digits and an `s` (`"12s"`, `"1.500s"`).
pub(crate) fn duration_text(seconds: i64, nanos: i32) -> String {
    let negative = seconds < 0 || nanos < 0;
    let sign = if negative { "-" } else { "" };
    let whole = seconds.unsigned_abs();
    let nanos = nanos.unsigned_abs();
    if nanos == 0 {
        format!("{sign}{whole}s")
    } else if nanos.is_multiple_of(1_000_000) {
        format!("{sign}{whole}.{:03}s", nanos / 1_000_000)
    } else if nanos.is_multiple_of(1_000) {
        format!("{sign}{whole}.{:06}s", nanos / 1_000)
    } else {
        format!("{sign}{whole}.{nanos:09}s")
    }
}

/// A `google.protobuf.Timestamp` as RFC 3339 UTC text
/// (`1970-01-01T00:00:00Z`, with 3, 6 or 9 fractional digits when needed).
pub(crate) fn timestamp_text(seconds: i64, nanos: i32) -> String {
    let days = seconds.div_euclid(86_400);
    let of_day = seconds.rem_euclid(86_400);
    let (year, month, day) = civil_from_days(days);
    let fraction = match nanos.unsigned_abs() {
        0 => String::new(),
        n if n.is_multiple_of(1_000_000) => format!(".{:03}", n / 1_000_000),
        n if n.is_multiple_of(1_000) => format!(".{:06}", n / 1_000),
        n => format!(".{n:09}"),
    };
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}{fraction}Z",
        of_day / 3_600,
        of_day % 3_600 / 60,
        of_day % 60
    )
}

/// The proleptic Gregorian date of a day count from 1970-01-01 (Howard
/// Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// Bytes as proto3 JSON writes them: standard base64 with padding.
pub(crate) fn base64_text(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for (i, shift) in [18u32, 12, 6, 0].into_iter().enumerate() {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> shift) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Writes bytes as base64 text.
pub(crate) fn ser_bytes<S: Serializer>(bytes: &[u8], serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(&base64_text(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts() {
        assert_eq!(duration_text(12, 0), "12s");
        assert_eq!(duration_text(1, 500_000_000), "1.500s");
        assert_eq!(duration_text(0, 1), "0.000000001s");
        assert_eq!(timestamp_text(0, 0), "1970-01-01T00:00:00Z");
        assert_eq!(timestamp_text(1_767_225_630, 0), "2026-01-01T00:00:30Z");
        assert_eq!(
            timestamp_text(951_782_400, 5_000_000),
            "2000-02-29T00:00:00.005Z"
        );
        assert_eq!(base64_text(b""), "");
        assert_eq!(base64_text(b"f"), "Zg==");
        assert_eq!(base64_text(b"fo"), "Zm8=");
        assert_eq!(base64_text(b"foobar"), "Zm9vYmFy");
    }
}
