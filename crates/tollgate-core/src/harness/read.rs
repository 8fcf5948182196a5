//! Reading one element of the operations array: the operation's name and at
//! most the arguments its operation takes. Arguments past those are counted,
//! for the contract's `wrong number of arguments`, and dropped unread
//! ([`IgnoredAny`], which skips nested values without recursion).
//!
//! An element is read in one of two ways:
//!
//! - **As a value** ([`ReadOperation::seed`]), in one pass over the input:
//!   serde_json converts the name and the kept arguments as it reads them.
//!   It refuses a number past the range of an `f64` (`1e400`, ten million
//!   digits) as it converts it, and a string with a lone surrogate escape
//!   (`"\ud800"`) as it unescapes it; that refusal ends the reading of the
//!   whole document.
//! - **From its text** ([`ReadOperation::read_text`]), a [`RawValue`] that
//!   serde_json has checked and read past without converting any number: the
//!   element is read again as a value from its own text, and if a number
//!   refuses, once more with each argument taken as its own text and read
//!   alone ([`Argument::from_text`]), so that a number refused stops nothing
//!   but its argument. Such a number is no argument of any operation, so it
//!   ends as that argument's error, in the contract's order.
//!
//! `configure`'s policy is always kept as text, so that it is read as a policy
//! from the document itself: a field given twice is refused, where a
//! `serde_json::Value` would keep the last.

use std::borrow::Cow;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;

use super::argument::Argument;
use super::signature::arity;

/// The most arguments any operation takes.
const MOST_ARGUMENTS: usize = 3;

/// One element of the operations array as read, reused from one element to
/// the next.
#[derive(Debug)]
pub(crate) struct ReadOperation<'de> {
    /// The name: `None` when the element is not an array starting with a
    /// string (a malformed operation).
    pub(crate) name: Option<Cow<'de, str>>,
    /// The first arguments, at most as many as the named operation takes
    /// (none for a name no operation has).
    pub(crate) arguments: Vec<Argument<'de>>,
    /// How many arguments the element had, kept or not.
    pub(crate) count: usize,
}

impl<'de> ReadOperation<'de> {
    /// An empty operation, with room for the arguments of any operation.
    pub(crate) fn new() -> Self {
        ReadOperation {
            name: None,
            arguments: Vec::with_capacity(MOST_ARGUMENTS),
            count: 0,
        }
    }

    /// Reads the next element of a sequence as a value, in place of the
    /// operation read before: `next_element_seed(operation.seed())`.
    pub(crate) fn seed(&mut self) -> OperationSeed<'_, 'de> {
        OperationSeed {
            operation: self,
            read: Read::Values,
        }
    }

    /// Reads `element`, one element of the operations array as its text, in
    /// place of the operation read before. Never fails: any JSON text is an
    /// operation or a malformed one.
    pub(crate) fn read_text(&mut self, element: &'de RawValue) {
        let json = element.get();
        self.clear();
        // Only an array can be an operation (and a number outside one must
        // not be converted).
        if !json.starts_with('[') {
            return;
        }
        for read in [Read::Values, Read::Text] {
            let seed = OperationSeed {
                operation: self,
                read,
            };
            if seed
                .deserialize(&mut serde_json::Deserializer::from_str(json))
                .is_ok()
            {
                return;
            }
        }
        // The text is one JSON array that serde_json has checked, so reading
        // it from text cannot fail; if it did, the operation is malformed.
        self.clear();
    }

    fn clear(&mut self) {
        self.name = None;
        self.arguments.clear();
        self.count = 0;
    }
}

/// How the name and the arguments are read.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Read {
    /// As values, converted by serde_json as it reads them.
    Values,
    /// Each from its own text ([`Argument::from_text`]), so that a number
    /// serde_json refuses stops nothing but its argument.
    Text,
}

/// Reads one element of the operations array into a [`ReadOperation`].
pub(crate) struct OperationSeed<'b, 'de> {
    operation: &'b mut ReadOperation<'de>,
    read: Read,
}

impl<'de> DeserializeSeed<'de> for OperationSeed<'_, 'de> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        self.operation.clear();
        deserializer.deserialize_any(self)
    }
}

impl OperationSeed<'_, '_> {
    fn next<'de, A: SeqAccess<'de>>(
        read: Read,
        seq: &mut A,
    ) -> Result<Option<Argument<'de>>, A::Error> {
        match read {
            Read::Values => seq.next_element(),
            Read::Text => Ok(seq
                .next_element::<&'de RawValue>()?
                .map(Argument::from_text)),
        }
    }
}

/// Anything but an array is a malformed operation (left cleared).
impl<'de> Visitor<'de> for OperationSeed<'_, 'de> {
    type Value = ();

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("an operation")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let operation = self.operation;
        let name = Self::next(self.read, &mut seq)?.and_then(Argument::into_string);
        // A name no operation has keeps no argument; a malformed operation
        // neither, nor does it count them.
        let keep = name.as_deref().and_then(arity).unwrap_or(0);
        let malformed = name.is_none();
        let read = match name.as_deref() {
            Some("configure") => Read::Text,
            _ => self.read,
        };
        operation.name = name;
        while operation.count < keep {
            let Some(argument) = Self::next(read, &mut seq)? else {
                return Ok(());
            };
            operation.arguments.push(argument);
            operation.count += 1;
        }
        while seq.next_element::<IgnoredAny>()?.is_some() {
            if !malformed {
                operation.count += 1;
            }
        }
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(())
    }

    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }

    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }

    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }

    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads `json` from its text, and as a value when serde_json can read it
    /// as one, and checks both.
    fn read(json: &str, check: impl Fn(&ReadOperation<'_>)) {
        let element: &RawValue = serde_json::from_str(json).unwrap();
        let mut operation = ReadOperation::new();
        operation.read_text(element);
        check(&operation);
        let mut deserializer = serde_json::Deserializer::from_str(json);
        if operation.seed().deserialize(&mut deserializer).is_ok() {
            check(&operation);
        }
    }

    #[test]
    fn keeps_the_name_and_the_arguments_of_the_operation() {
        read(r#" ["request", "sk_a", 7] "#, |operation| {
            assert_eq!(operation.name.as_deref(), Some("request"));
            assert_eq!(operation.count, 2);
            assert_eq!(operation.arguments[0].as_str(), Some("sk_a"));
            assert_eq!(operation.arguments[1].as_u64(), Some(7));
        });
        read(r#"["req\u0075est_batch", "k", 1, 2]"#, |operation| {
            assert_eq!(operation.name.as_deref(), Some("request_batch"));
            assert_eq!(operation.arguments.len(), 3);
        });
    }

    #[test]
    fn arguments_past_the_operation_are_counted_not_kept() {
        let input = format!(r#"["request", "sk_a", 1{}]"#, ", 1".repeat(100_000));
        read(&input, |operation| {
            assert_eq!(operation.count, 100_002);
            assert_eq!(operation.arguments.len(), 2);
            // The buffer never grew past the room it was made with.
            assert!(operation.arguments.capacity() <= 4);
        });
        // A name no operation has keeps nothing.
        read(&format!(r#"["ping"{}]"#, ", 1".repeat(1000)), |operation| {
            assert_eq!(operation.name.as_deref(), Some("ping"));
            assert!(operation.arguments.is_empty());
        });
        // Too few arguments are all kept.
        read(r#"["request_batch", "k"]"#, |operation| {
            assert_eq!(operation.count, 1);
            assert_eq!(operation.arguments.len(), 1);
        });
    }

    #[test]
    fn a_number_out_of_range_is_read_from_text_where_it_stands() {
        let long = "9".repeat(100_000);
        for (json, name, arguments) in [
            (r#"["request", "k", 1e400]"#.to_owned(), "request", 2),
            (
                format!(r#"["request_batch", "k", 1, {long}]"#),
                "request_batch",
                3,
            ),
            (format!(r#"["request", {long}, 1]"#), "request", 2),
            (r#"["request", "k", 1, 1e400]"#.to_owned(), "request", 3),
        ] {
            read(&json, |operation| {
                assert_eq!(operation.name.as_deref(), Some(name));
                assert_eq!(operation.count, arguments);
            });
        }
        read(r#"["request_batch", "k", 2, 1e400]"#, |operation| {
            assert_eq!(operation.arguments[0].as_str(), Some("k"));
            assert_eq!(operation.arguments[1].as_u64(), Some(2));
            assert_eq!(operation.arguments[2], Argument::Other);
        });
    }

    #[test]
    fn anything_but_an_array_starting_with_a_string_is_malformed() {
        for json in [
            "[]",
            "[1, 2]",
            "[1e400]",
            r#"{"request": 1}"#,
            "1e400",
            r#""request""#,
        ] {
            read(json, |operation| {
                assert_eq!(operation.name, None, "{json}");
                assert!(operation.arguments.is_empty());
            });
        }
    }
}
