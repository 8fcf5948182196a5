//! The generic decoding of a document into Go values, as envoyproxy/ratelimit's
//! first `yaml.Unmarshal` into `map[interface{}]interface{}` makes them (its
//! `ConfigFileContentToYaml`): scalars resolved, a later duplicate key replacing
//! an earlier one, merge keys (`<<`) applied, timestamps kept as their text.

use super::go_value::GoValue;
use super::node::{Node, NodeKind, type_error};
use super::resolve::Resolved;

/// The decoding of a document into the top-level map.
///
/// # Errors
///
/// yaml.v2's message: a type error when the document is not a mapping (`yaml: unmarshal errors:\n  line 1: cannot
/// unmarshal !!seq into map[interface {}]interface {}`), an invalid map key or
/// a bad merge.
pub(crate) fn decode_root(root: Option<&Node>) -> Result<Vec<(GoValue, GoValue)>, String> {
    let Some(root) = root else {
        return Ok(Vec::new());
    };
    match &root.kind {
        NodeKind::Map(_) => {
            let mut out = Vec::new();
            decode_map(root, &mut out)?;
            Ok(out)
        }
        _ if root.is_null() => Ok(Vec::new()),
        _ => Err(format!(
            "yaml: unmarshal errors:\n  {}",
            type_error(root, "map[interface {}]interface {}")
        )),
    }
}

/// A node decoded into an `interface{}`.
pub(crate) fn decode_value(node: &Node) -> Result<GoValue, String> {
    Ok(match &node.kind {
        NodeKind::Scalar { text, .. } => match node.resolved() {
            Some(Resolved::Null) => GoValue::Nil,
            Some(Resolved::Bool(value)) => GoValue::Bool(value),
            Some(Resolved::Int(value)) => GoValue::Int(value),
            Some(Resolved::Uint(value)) => GoValue::Uint(value),
            Some(Resolved::Float(value)) => GoValue::Float(value),
            Some(Resolved::Timestamp | Resolved::Str) | None => GoValue::Str(text.clone()),
        },
        NodeKind::Seq(items) => {
            GoValue::Seq(items.iter().map(decode_value).collect::<Result<_, _>>()?)
        }
        NodeKind::Map(_) => {
            let mut out = Vec::new();
            decode_map(node, &mut out)?;
            GoValue::Map(out)
        }
    })
}

/// A mapping decoded into `out`, entries replacing earlier equal keys.
fn decode_map(node: &Node, out: &mut Vec<(GoValue, GoValue)>) -> Result<(), String> {
    for (key, value) in flatten_entries(node)? {
        let key = decode_value(key)?;
        if matches!(key, GoValue::Seq(_) | GoValue::Map(_)) {
            return Err(format!(
                "yaml: invalid map key: {}",
                super::gofmt::format_v(&key)
            ));
        }
        let value = decode_value(value)?;
        match out.iter_mut().find(|(existing, _)| existing.same_key(&key)) {
            Some(entry) => entry.1 = value,
            None => out.push((key, value)),
        }
    }
    Ok(())
}

/// The entries of a mapping in the order yaml.v2 applies them, merge keys
/// expanded in place: a merged mapping's entries where the `<<` stands, a
/// sequence of mappings from its last to its first (so the first wins).
///
/// # Errors
///
/// yaml.v2's `map merge requires map or sequence of maps as the value`.
pub(crate) fn flatten_entries(node: &Node) -> Result<Vec<(&Node, &Node)>, String> {
    let mut out = Vec::new();
    push_entries(node, &mut out)?;
    Ok(out)
}

fn push_entries<'n>(node: &'n Node, out: &mut Vec<(&'n Node, &'n Node)>) -> Result<(), String> {
    const WANT_MAP: &str = "yaml: map merge requires map or sequence of maps as the value";
    let NodeKind::Map(entries) = &node.kind else {
        return Err(WANT_MAP.to_owned());
    };
    for (key, value) in entries {
        if !key.is_merge() {
            out.push((key, value));
            continue;
        }
        match &value.kind {
            NodeKind::Map(_) => push_entries(value, out)?,
            NodeKind::Seq(items) => {
                for item in items.iter().rev() {
                    push_entries(item, out)?;
                }
            }
            NodeKind::Scalar { .. } => return Err(WANT_MAP.to_owned()),
        }
    }
    Ok(())
}
