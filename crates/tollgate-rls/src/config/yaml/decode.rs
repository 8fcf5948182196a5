//! Typed decoding with gopkg.in/yaml.v2's rules, as envoyproxy/ratelimit's second
//! `yaml.Unmarshal` into its `YamlRoot` struct does: a null sets the zero value,
//! a scalar goes into a string field as its source text, a value of the wrong
//! type is a type error (`line 5: cannot unmarshal !!str `abc` into uint32`)
//! collected while decoding goes on, unknown fields are skipped, a later
//! duplicate field overwrites an earlier one.

use super::generic::{decode_value, flatten_entries};
use super::go_value::GoValue;
use super::node::{Node, NodeKind, type_error};
use super::resolve::Resolved;

/// A decoding in progress: the type errors met so far.
#[derive(Default)]
pub(crate) struct Decoder {
    errors: Vec<String>,
    fatal: Option<String>,
}

impl Decoder {
    /// The outcome: `Ok` without type errors.
    ///
    /// # Errors
    ///
    /// `yaml: unmarshal errors:\n  line ...` with every type error, one a line,
    /// as yaml.v2's `TypeError` prints them.
    pub(crate) fn finish(self) -> Result<(), String> {
        if let Some(fatal) = self.fatal {
            return Err(fatal);
        }
        if self.errors.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "yaml: unmarshal errors:\n  {}",
                self.errors.join("\n  ")
            ))
        }
    }

    fn type_error(&mut self, node: &Node, type_name: &str) -> bool {
        self.errors.push(type_error(node, type_name));
        false
    }

    /// A Go `string` field: a scalar's text, `""` for a null.
    pub(crate) fn string(&mut self, node: &Node, out: &mut String) -> bool {
        match &node.kind {
            _ if node.is_null() => {
                out.clear();
                true
            }
            NodeKind::Scalar { text, .. } => {
                text.clone_into(out);
                true
            }
            NodeKind::Seq(_) | NodeKind::Map(_) => self.type_error(node, "string"),
        }
    }

    /// A Go `bool` field: a YAML 1.1 boolean, `false` for a null.
    pub(crate) fn bool(&mut self, node: &Node, out: &mut bool) -> bool {
        match node.resolved() {
            Some(Resolved::Null) => *out = false,
            Some(Resolved::Bool(value)) => *out = value,
            _ => return self.type_error(node, "bool"),
        }
        true
    }

    /// A Go unsigned integer field of at most `max` (`u32::MAX` for `uint32`),
    /// 0 for a null; negative or larger values are type errors.
    pub(crate) fn uint(&mut self, node: &Node, max: u64, type_name: &str, out: &mut u64) -> bool {
        let value = match node.resolved() {
            Some(Resolved::Null) => Some(0),
            Some(Resolved::Int(value)) => u64::try_from(value).ok().filter(|&v| v <= max),
            Some(Resolved::Uint(value)) => Some(value).filter(|&v| v <= max),
            Some(Resolved::Float(value))
                if (0.0..18_446_744_073_709_551_616.0).contains(&value) =>
            {
                // Go converts with truncation; `as` does the same in range.
                Some(value as u64).filter(|&v| v <= max)
            }
            _ => None,
        };
        match value {
            Some(value) => {
                *out = value;
                true
            }
            None => self.type_error(node, type_name),
        }
    }

    /// An optional `uint64` (a tollgate extension's `*uint64`): `None` for a
    /// null, else [`Decoder::uint`]'s value; a bad value is a type error and
    /// leaves `out` as it was.
    pub(crate) fn optional_uint64(&mut self, node: &Node, out: &mut Option<u64>) {
        if node.is_null() {
            *out = None;
            return;
        }
        let mut value = 0;
        if self.uint(node, u64::MAX, "uint64", &mut value) {
            *out = Some(value);
        }
    }

    /// A Go struct: `field` is called with each key's text and value node, in
    /// order (merge keys expanded); a null resets the struct to its zero value.
    pub(crate) fn structure<T: Default>(
        &mut self,
        node: &Node,
        out: &mut T,
        type_name: &str,
        mut field: impl FnMut(&mut Self, &str, &Node, &mut T),
    ) -> bool {
        if node.is_null() {
            *out = T::default();
            return true;
        }
        if !matches!(node.kind, NodeKind::Map(_)) {
            return self.type_error(node, type_name);
        }
        let entries = match flatten_entries(node) {
            Ok(entries) => entries,
            Err(fatal) => {
                self.fatal.get_or_insert(fatal);
                return false;
            }
        };
        for (key, value) in entries {
            let mut name = String::new();
            if self.string(key, &mut name) {
                field(self, &name, value, out);
            }
        }
        true
    }

    /// A Go pointer to a struct: `None` for a null, else the struct decoded
    /// into the one already there (or a new one).
    pub(crate) fn pointer<T: Default>(
        &mut self,
        node: &Node,
        out: &mut Option<T>,
        type_name: &str,
        field: impl FnMut(&mut Self, &str, &Node, &mut T),
    ) -> bool {
        if node.is_null() {
            *out = None;
            return true;
        }
        self.structure(node, out.get_or_insert_with(T::default), type_name, field)
    }

    /// A Go slice: a sequence's elements decoded by `element` (those that fail
    /// are left out, as yaml.v2 does), empty for a null.
    pub(crate) fn slice<T: Default>(
        &mut self,
        node: &Node,
        out: &mut Vec<T>,
        type_name: &str,
        mut element: impl FnMut(&mut Self, &Node, &mut T) -> bool,
    ) -> bool {
        match &node.kind {
            _ if node.is_null() => {
                out.clear();
                true
            }
            NodeKind::Seq(items) => {
                out.clear();
                for item in items {
                    let mut value = T::default();
                    if element(self, item, &mut value) {
                        out.push(value);
                    }
                }
                true
            }
            NodeKind::Scalar { .. } | NodeKind::Map(_) => self.type_error(node, type_name),
        }
    }

    /// A Go `map[string]interface{}`: keys as text, values as generic Go values,
    /// a later key replacing an earlier one; `None` (a nil map) for a null.
    pub(crate) fn string_map(
        &mut self,
        node: &Node,
        out: &mut Option<Vec<(String, GoValue)>>,
        type_name: &str,
    ) -> bool {
        if node.is_null() {
            *out = None;
            return true;
        }
        if !matches!(node.kind, NodeKind::Map(_)) {
            return self.type_error(node, type_name);
        }
        let entries = match flatten_entries(node) {
            Ok(entries) => entries,
            Err(fatal) => {
                self.fatal.get_or_insert(fatal);
                return false;
            }
        };
        let map = out.get_or_insert_with(Vec::new);
        for (key, value) in entries {
            let mut name = String::new();
            if !self.string(key, &mut name) {
                continue;
            }
            let value = match decode_value(value) {
                Ok(value) => value,
                Err(fatal) => {
                    self.fatal.get_or_insert(fatal);
                    return false;
                }
            };
            match map.iter_mut().find(|(existing, _)| *existing == name) {
                Some(entry) => entry.1 = value,
                None => map.push((name, value)),
            }
        }
        true
    }
}
