//! The operations document, the top-level JSON array, applied element by
//! element as it is read and each output written at once.
//!
//! It is read in one pass, each element as a value ([`ReadOperation::seed`]).
//! serde_json ends that pass with an error when an operation holds a number it
//! cannot convert (`1e400`) or a string it cannot unescape (a lone surrogate
//! escape, `"\ud800"`, which no Rust string holds), or when the input is not
//! JSON. The document is
//! then read once more from the start, each element as its text
//! ([`ReadOperation::read_text`], which no number can stop): the elements
//! already applied are passed over, and the rest are applied. Only input that
//! is not one JSON array stops that second reading. Each pass is linear, and
//! there are at most two.

use std::fmt;

use serde::de::{Deserializer as _, SeqAccess, Visitor};
use serde_json::value::RawValue;

use super::Harness;
use super::read::ReadOperation;

/// Runs `input`, writing the array of outputs to `out`.
///
/// # Errors
///
/// serde_json's error when `input` is not one JSON array; `out` is then
/// incomplete.
pub(super) fn run(
    harness: &mut Harness,
    input: &str,
    out: &mut Vec<u8>,
) -> Result<(), serde_json::Error> {
    out.push(b'[');
    let mut applied = 0;
    if read(harness, input, out, Read::Values, &mut applied).is_err() {
        read(harness, input, out, Read::Text, &mut applied)?;
    }
    out.extend_from_slice(b"]\n");
    Ok(())
}

/// How the elements are read.
#[derive(Clone, Copy, PartialEq)]
enum Read {
    /// As values, in one pass.
    Values,
    /// As text, passing over the elements already applied.
    Text,
}

/// Reads the whole document, applying the elements from number `*applied` on
/// and counting them in `applied`.
fn read(
    harness: &mut Harness,
    input: &str,
    out: &mut Vec<u8>,
    read: Read,
    applied: &mut usize,
) -> Result<(), serde_json::Error> {
    let mut deserializer = serde_json::Deserializer::from_str(input);
    deserializer.deserialize_seq(Operations {
        harness,
        out,
        read,
        applied,
    })?;
    deserializer.end()
}

/// The top-level array, applied element by element as it is read.
struct Operations<'a> {
    harness: &'a mut Harness,
    out: &'a mut Vec<u8>,
    read: Read,
    /// Elements applied so far, whose outputs are in `out`.
    applied: &'a mut usize,
}

impl Operations<'_> {
    /// Applies the operation just read and writes its output.
    fn apply<E: serde::de::Error>(&mut self, operation: &ReadOperation<'_>) -> Result<(), E> {
        if *self.applied > 0 {
            self.out.push(b',');
        }
        *self.applied += 1;
        let output = self.harness.apply_read(operation);
        serde_json::to_writer(&mut *self.out, &output).map_err(E::custom)
    }
}

impl<'de> Visitor<'de> for Operations<'_> {
    type Value = ();

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("a JSON array of operations")
    }

    fn visit_seq<A: SeqAccess<'de>>(mut self, mut elements: A) -> Result<(), A::Error> {
        let mut operation = ReadOperation::new();
        match self.read {
            Read::Values => {
                while elements.next_element_seed(operation.seed())?.is_some() {
                    self.apply(&operation)?;
                }
            }
            Read::Text => {
                let mut passed = 0;
                let applied = *self.applied;
                while let Some(element) = elements.next_element::<&'de RawValue>()? {
                    if passed < applied {
                        passed += 1;
                        continue;
                    }
                    operation.read_text(element);
                    self.apply(&operation)?;
                }
            }
        }
        Ok(())
    }
}
