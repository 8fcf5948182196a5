//! An operation's name and arguments as read from JSON, borrowing strings from
//! the input where it can, so that reading an operation allocates nothing in the
//! common case.

use std::borrow::Cow;
use std::fmt;

use serde::Deserialize;
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

/// One argument of an operation.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Argument<'a> {
    /// A JSON string.
    String(Cow<'a, str>),
    /// A JSON integer from 0 to 2^64-1.
    Unsigned(u64),
    /// Any other JSON value: negative or fractional numbers, booleans, null,
    /// arrays and objects.
    Other(Cow<'a, Value>),
}

impl<'a> Argument<'a> {
    /// Borrows a parsed JSON value as an argument.
    pub(crate) fn from_value(value: &'a Value) -> Self {
        match value {
            Value::String(text) => Argument::String(Cow::Borrowed(text)),
            Value::Number(number) if number.is_u64() => number
                .as_u64()
                .map_or(Argument::Other(Cow::Borrowed(value)), Argument::Unsigned),
            _ => Argument::Other(Cow::Borrowed(value)),
        }
    }

    pub(crate) fn as_str(&self) -> Option<&str> {
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

    /// The argument as a JSON value (for a policy object).
    pub(crate) fn to_value(&self) -> Cow<'_, Value> {
        match self {
            Argument::String(text) => Cow::Owned(Value::from(text.as_ref())),
            Argument::Unsigned(number) => Cow::Owned(Value::from(*number)),
            Argument::Other(value) => Cow::Borrowed(value.as_ref()),
        }
    }
}

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

    fn visit_i64<E>(self, number: i64) -> Result<Self::Value, E> {
        Ok(Argument::Other(Cow::Owned(Value::from(number))))
    }

    fn visit_f64<E>(self, number: f64) -> Result<Self::Value, E> {
        Ok(Argument::Other(Cow::Owned(Value::from(number))))
    }

    fn visit_bool<E>(self, value: bool) -> Result<Self::Value, E> {
        Ok(Argument::Other(Cow::Owned(Value::Bool(value))))
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(Argument::Other(Cow::Owned(Value::Null)))
    }

    /// No operation takes an array: its content is read past, not kept.
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Argument::Other(Cow::Owned(Value::Array(Vec::new()))))
    }

    /// An object (a policy) is kept one level deep: a policy's fields are
    /// numbers and strings, so nested content only needs to be told apart
    /// from them, and a deep document never becomes a deep value.
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut object = serde_json::Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let Shallow(value) = map.next_value()?;
            object.insert(key, value);
        }
        Ok(Argument::Other(Cow::Owned(Value::Object(object))))
    }
}

/// A JSON value with any array or object in it read past and left empty.
struct Shallow(Value);

impl<'de> Deserialize<'de> for Shallow {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ShallowVisitor)
    }
}

struct ShallowVisitor;

impl<'de> Visitor<'de> for ShallowVisitor {
    type Value = Shallow;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("any JSON value")
    }

    fn visit_bool<E>(self, value: bool) -> Result<Shallow, E> {
        Ok(Shallow(Value::Bool(value)))
    }

    fn visit_i64<E>(self, value: i64) -> Result<Shallow, E> {
        Ok(Shallow(Value::from(value)))
    }

    fn visit_u64<E>(self, value: u64) -> Result<Shallow, E> {
        Ok(Shallow(Value::from(value)))
    }

    fn visit_f64<E>(self, value: f64) -> Result<Shallow, E> {
        Ok(Shallow(Value::from(value)))
    }

    fn visit_str<E>(self, value: &str) -> Result<Shallow, E> {
        Ok(Shallow(Value::from(value)))
    }

    fn visit_unit<E>(self) -> Result<Shallow, E> {
        Ok(Shallow(Value::Null))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Shallow, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Shallow(Value::Array(Vec::new())))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Shallow, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Shallow(Value::Object(serde_json::Map::new())))
    }
}

/// Reads one element of the operations array: `Some(name)` with the arguments
/// pushed to `arguments`, or `None` when the element is not an array starting
/// with a string (a malformed operation, read to its end and dropped).
pub(crate) struct OperationSeed<'b, 'de> {
    pub(crate) arguments: &'b mut Vec<Argument<'de>>,
}

impl<'de> DeserializeSeed<'de> for OperationSeed<'_, 'de> {
    type Value = Option<Cow<'de, str>>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for OperationSeed<'_, 'de> {
    type Value = Option<Cow<'de, str>>;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("an operation")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        self.arguments.clear();
        let name = match seq.next_element::<Argument<'de>>()? {
            Some(Argument::String(name)) => name,
            Some(_) => {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                return Ok(None);
            }
            None => return Ok(None),
        };
        while let Some(argument) = seq.next_element()? {
            self.arguments.push(argument);
        }
        Ok(Some(name))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(None)
    }

    fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
}
