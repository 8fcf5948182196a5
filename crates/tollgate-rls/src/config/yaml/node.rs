//! The YAML node tree the loader works on: every scalar keeps its source text,
//! whether it was plain (unquoted), and its line, so that scalars can be resolved
//! with gopkg.in/yaml.v2's rules and errors can name lines as yaml.v2 does.

use super::resolve::{Resolved, resolve_plain};

/// One node of a YAML document, aliases already expanded.
#[derive(Clone, Debug)]
pub(crate) struct Node {
    /// 1-based line of the node (for a collection, of its first entry; for a node
    /// whose position the parser does not report, of the node read before it).
    pub(crate) line: usize,
    /// What the node is.
    pub(crate) kind: NodeKind,
}

/// The kinds of YAML nodes.
#[derive(Clone, Debug)]
pub(crate) enum NodeKind {
    /// A scalar: its text as written (after quote and escape processing) and
    /// whether it was a plain scalar, the only kind yaml.v2 resolves to
    /// anything but a string.
    Scalar {
        /// The scalar's value text.
        text: String,
        /// `true` for a plain (unquoted, untagged) scalar.
        plain: bool,
    },
    /// A sequence.
    Seq(Vec<Node>),
    /// A mapping, in document order, duplicates kept.
    Map(Vec<(Node, Node)>),
}

impl Node {
    /// The yaml.v2 resolution of a scalar (`None` for a collection).
    pub(crate) fn resolved(&self) -> Option<Resolved> {
        match &self.kind {
            NodeKind::Scalar { text, plain: true } => Some(resolve_plain(text)),
            NodeKind::Scalar { plain: false, .. } => Some(Resolved::Str),
            NodeKind::Seq(_) | NodeKind::Map(_) => None,
        }
    }

    /// Whether the node is a null scalar (`~`, `null`, `Null`, `NULL` or empty,
    /// unquoted): yaml.v2 decodes it as the zero value of any target.
    pub(crate) fn is_null(&self) -> bool {
        matches!(self.resolved(), Some(Resolved::Null))
    }

    /// Whether the node is a merge key: a plain `<<`, as yaml.v2's `isMerge`.
    pub(crate) fn is_merge(&self) -> bool {
        matches!(&self.kind, NodeKind::Scalar { text, plain: true } if text == "<<")
    }

    /// The yaml.v2 short tag of the node, as printed in its type errors.
    pub(crate) fn short_tag(&self) -> &'static str {
        match self.resolved() {
            Some(resolved) => resolved.short_tag(),
            None => match self.kind {
                NodeKind::Seq(_) => "!!seq",
                _ => "!!map",
            },
        }
    }
}

/// yaml.v2's type error text for `node` decoded into the Go type `type_name`:
/// `line N: cannot unmarshal TAG `VALUE` into TYPE` (a value longer than 10
/// bytes is cut to 7 and `...`; collections print no value).
pub(crate) fn type_error(node: &Node, type_name: &str) -> String {
    let tag = node.short_tag();
    let value = match &node.kind {
        NodeKind::Scalar { text, .. } if text.len() > 10 => {
            format!(" `{}...`", String::from_utf8_lossy(&text.as_bytes()[..7]))
        }
        NodeKind::Scalar { text, .. } => format!(" `{text}`"),
        NodeKind::Seq(_) | NodeKind::Map(_) => String::new(),
    };
    format!(
        "line {}: cannot unmarshal {tag}{value} into {type_name}",
        node.line
    )
}
