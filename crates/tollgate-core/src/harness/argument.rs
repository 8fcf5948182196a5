//! One argument of an operation as the contract reads it: a string, an
//! integer from 0 to 2^64-1, an object (kept as its JSON text, for a policy),
//! or anything else. An argument is read as a JSON value, which serde_json
//! converts as it reads; or from its JSON text as serde_json checked it (a
//! [`RawValue`]), where a number serde_json refuses to convert (`1e400`) is
//! just another value that is no string and no integer.

use std::borrow::Cow;
use std::fmt;

use serde::Deserialize;
use serde::de::{Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;

use crate::policy::{Policy, PolicyError};

/// One argument of an operation, borrowing from the input.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Argument<'a> {
    /// A JSON string, unescaped (borrowed when it has no escapes).
    String(Cow<'a, str>),
    /// A JSON integer from 0 to 2^64-1.
    Unsigned(u64),
    /// A JSON object as its text, when read from text ([`Argument::from_text`]);
    /// only `configure` reads its argument so.
    Object(&'a str),
    /// Any other JSON value: negative, fractional or larger numbers (however
    /// many digits or however large an exponent), booleans, null, arrays, and
    /// objects read as values.
    Other,
}

impl<'a> Argument<'a> {
    /// Reads the argument from `text`, one JSON value as serde_json checked it:
    /// an object is kept as its text, anything else is read as a value, and a
    /// number serde_json refuses to convert is [`Argument::Other`].
    pub(crate) fn from_text(text: &'a RawValue) -> Self {
        let json = text.get();
        if json.starts_with('{') {
            Argument::Object(json)
        } else {
            // Read from bytes, not from the `str`: this rare path then has a
            // reader of its own, and the reading of every other argument stays
            // inlined in the hot loop (2 % fewer instructions on 1M operations).
            serde_json::from_slice(json.as_bytes()).unwrap_or(Argument::Other)
        }
    }

    pub(crate) fn as_str(&self) -> Option<&str> {
        match self {
            Argument::String(text) => Some(text),
            _ => None,
        }
    }

    /// The string, keeping its borrow of the input when it has one.
    pub(crate) fn into_string(self) -> Option<Cow<'a, str>> {
        match self {
            Argument::String(text) => Some(text),
            _ => None,
        }
    }

    pub(crate) fn as_u64(&self) -> Option<u64> {
        match self {
            Argument::Unsigned(number) => Some(*number),
            _ => None,
        }
    }

    /// The argument read as a policy object, from its text: a field given
    /// twice is refused (`duplicate field `limit``), as is a number out of a
    /// field's range, however large.
    pub(crate) fn to_policy(&self) -> Result<Policy, PolicyError> {
        match self {
            Argument::Object(json) => Policy::from_deserializer(
                &mut serde_json::Deserializer::from_str(json),
            )
            .map_err(|error| match error {
                PolicyError::Malformed(reason) => PolicyError::Malformed(without_position(reason)),
                other => other,
            }),
            _ => Err(PolicyError::Malformed(
                "expected a policy object, got another JSON value".to_owned(),
            )),
        }
    }
}

/// `reason` without the place serde_json appends (` at line 1 column 41`):
/// it counts in the policy's own text, not in the input, so it would mislead.
fn without_position(reason: String) -> String {
    let digits = |text: &str| !text.is_empty() && text.bytes().all(|byte| byte.is_ascii_digit());
    match reason.rsplit_once(" at line ") {
        Some((message, place))
            if place
                .split_once(" column ")
                .is_some_and(|(line, column)| digits(line) && digits(column)) =>
        {
            message.to_owned()
        }
        _ => reason,
    }
}

/// Read as a JSON value: strings borrowed where they can be, and the content
/// of arrays and objects read past, not kept (no argument but a policy is
/// either, and a policy is read from text).
impl<'de> Deserialize<'de> for Argument<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ArgumentVisitor)
    }
}

struct ArgumentVisitor;

impl<'de> Visitor<'de> for ArgumentVisitor {
    type Value = Argument<'de>;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("any JSON value")
    }

    fn visit_borrowed_str<E>(self, text: &'de str) -> Result<Self::Value, E> {
        Ok(Argument::String(Cow::Borrowed(text)))
    }

    fn visit_str<E>(self, text: &str) -> Result<Self::Value, E> {
        Ok(Argument::String(Cow::Owned(text.to_owned())))
    }

    fn visit_string<E>(self, text: String) -> Result<Self::Value, E> {
        Ok(Argument::String(Cow::Owned(text)))
    }

    fn visit_u64<E>(self, number: u64) -> Result<Self::Value, E> {
        Ok(Argument::Unsigned(number))
    }

    fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
        Ok(Argument::Other)
    }

    fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
        Ok(Argument::Other)
    }

    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok(Argument::Other)
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(Argument::Other)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Argument::Other)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Argument::Other)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn from_text(json: &str) -> Argument<'_> {
        let text: &RawValue = serde_json::from_str(json).unwrap();
        Argument::from_text(text)
    }

    fn from_value(json: &str) -> Argument<'_> {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn text_and_value_read_strings_and_integers_alike() {
        for read in [from_text, from_value] {
            assert_eq!(read(r#""sk_a""#), Argument::String(Cow::Borrowed("sk_a")));
            assert_eq!(
                read(r#""sk_\u0061\n""#),
                Argument::String(Cow::Owned("sk_a\n".to_owned()))
            );
            assert_eq!(read("0"), Argument::Unsigned(0));
            assert_eq!(read("18446744073709551615"), Argument::Unsigned(u64::MAX));
            for other in [
                "18446744073709551616",
                "-1",
                "-0",
                "1.0",
                "1e3",
                "1E300",
                "true",
                "null",
                "[1]",
            ] {
                assert_eq!(read(other), Argument::Other, "{other}");
            }
        }
        assert_eq!(from_value(r#"{"a": 1}"#), Argument::Other);
        assert_eq!(from_text(r#"{"a": 1}"#), Argument::Object(r#"{"a": 1}"#));
    }

    #[test]
    fn from_text_no_number_is_out_of_range() {
        for json in [
            "9".repeat(100_000),
            format!("1e{}", "9".repeat(1000)),
            "-1e400".to_owned(),
            "1e400".to_owned(),
        ] {
            assert_eq!(from_text(&json), Argument::Other);
            // serde_json refuses each of them as a value.
            assert!(serde_json::from_str::<Argument<'_>>(&json).is_err());
        }
    }

    #[test]
    fn a_policy_is_read_from_an_object_and_refuses_a_field_given_twice() {
        let policy = from_text(r#"{"algorithm": "sliding_log", "limit": 2, "window_s": 10}"#);
        assert_eq!(policy.to_policy(), Ok(Policy::sliding_log(2, 10).unwrap()));
        let twice =
            from_text(r#"{"algorithm": "fixed_window", "limit": 10, "limit": 20, "window_s": 60}"#);
        let reason = twice.to_policy().unwrap_err().to_string();
        assert_eq!(reason, "duplicate field `limit`");
        let large = from_text(r#"{"algorithm": "fixed_window", "limit": 1e400, "window_s": 60}"#);
        let reason = large.to_policy().unwrap_err().to_string();
        assert_eq!(reason, "limit: number out of range");
        for not_an_object in [r#""fixed_window""#, r#"["fixed_window", 1, 60]"#, "7"] {
            assert_eq!(
                from_text(not_an_object).to_policy(),
                Err(PolicyError::Malformed(
                    "expected a policy object, got another JSON value".to_owned()
                ))
            );
        }
    }
}
