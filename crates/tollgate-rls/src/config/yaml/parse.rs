//! Reading YAML text into a [`Node`] tree with serde_yaml_ng, in two passes.
//!
//! serde_yaml_ng resolves scalars with YAML 1.2 rules and hands numbers over
//! without their text, while envoyproxy/ratelimit (gopkg.in/yaml.v2) resolves
//! with YAML 1.1 rules and copies a scalar's source text into string fields
//! (`value: 0x10` is the string `0x10`). So the first pass only learns the shape
//! of the document (`deserialize_any`), and the second walks the same shape
//! asking for every scalar as a string (`deserialize_str`), which serde_yaml_ng
//! answers with the scalar's text, borrowed from the input when it can: the
//! borrowed slice's place in the input gives its line and whether a quote opens
//! it. Aliases are expanded by serde_yaml_ng in both passes alike. Only the first
//! document is read, as yaml.v2's `Unmarshal` does.

use std::cell::Cell;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

use super::node::{Node, NodeKind};

/// Parses the first document of `input`; `Ok(None)` when there is none (empty
/// text or only comments).
///
/// # Errors
///
/// The parser's message, in yaml.v2's form where it can be told
/// (`yaml: line 2: found unexpected end of stream`).
pub(crate) fn parse_document(input: &str) -> Result<Option<Node>, String> {
    let Some(document) = serde_yaml_ng::Deserializer::from_str(input).next() else {
        return Ok(None);
    };
    let shape = match Shape::deserialize(document) {
        Ok(shape) => shape,
        Err(error) if is_empty_document(&error) => return Ok(None),
        Err(error) => return Err(yaml_v2_message(&error)),
    };
    let Some(document) = serde_yaml_ng::Deserializer::from_str(input).next() else {
        return Ok(None);
    };
    let context = Context {
        input,
        line_starts: line_starts(input),
        last_line: Cell::new(1),
    };
    let node = RawSeed {
        shape: &shape,
        context: &context,
    }
    .deserialize(document);
    match node {
        Ok(node) => Ok(Some(node)),
        Err(error) if is_empty_document(&error) => Ok(None),
        Err(error) => Err(yaml_v2_message(&error)),
    }
}

/// serde_yaml_ng's error for a document without a node (empty text, only
/// comments, `---` alone), where yaml.v2 leaves its target untouched.
fn is_empty_document(error: &serde_yaml_ng::Error) -> bool {
    error.to_string().starts_with("EOF while parsing a value")
}

/// Rewrites a libyaml error as yaml.v2 prints it: `yaml: line N: problem`.
fn yaml_v2_message(error: &serde_yaml_ng::Error) -> String {
    let text = error.to_string();
    let problem = text
        .split(" at line ")
        .next()
        .and_then(|head| head.split(" at position ").next())
        .unwrap_or(&text);
    match error.location() {
        // yaml.v2 numbers a scanner error's line from 1 and a parser error's
        // from 0 (its `fail` adds one for scanner errors only).
        Some(location) => {
            let parser_error = format!("{error:?}").contains("kind: PARSER");
            let line = if parser_error {
                location.line().saturating_sub(1)
            } else {
                location.line()
            };
            if line == 0 {
                format!("yaml: {problem}")
            } else {
                format!("yaml: line {line}: {problem}")
            }
        }
        None => format!("yaml: {problem}"),
    }
}

/// The shape of a document: which nodes are scalars, sequences and mappings.
enum Shape {
    Scalar,
    Seq(Vec<Shape>),
    Map(Vec<(Shape, Shape)>),
}

impl Shape {
    fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ShapeVisitor)
    }
}

impl<'de> de::Deserialize<'de> for Shape {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ShapeVisitor)
    }
}

struct ShapeVisitor;

macro_rules! scalar_visits {
    ($($method:ident: $ty:ty),* $(,)?) => {
        $(fn $method<E: de::Error>(self, _: $ty) -> Result<Shape, E> {
            Ok(Shape::Scalar)
        })*
    };
}

impl<'de> Visitor<'de> for ShapeVisitor {
    type Value = Shape;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("a YAML node")
    }

    scalar_visits!(
        visit_bool: bool,
        visit_i64: i64,
        visit_u64: u64,
        visit_i128: i128,
        visit_u128: u128,
        visit_f64: f64,
        visit_str: &str,
        visit_bytes: &[u8],
    );

    fn visit_unit<E: de::Error>(self) -> Result<Shape, E> {
        Ok(Shape::Scalar)
    }

    fn visit_none<E: de::Error>(self) -> Result<Shape, E> {
        Ok(Shape::Scalar)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Shape, D::Error> {
        deserializer.deserialize_any(ShapeVisitor)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Shape, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<Shape>()? {
            items.push(item);
        }
        Ok(Shape::Seq(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Shape, A::Error> {
        let mut entries = Vec::new();
        while let Some((key, value)) = map.next_entry::<Shape, Shape>()? {
            entries.push((key, value));
        }
        Ok(Shape::Map(entries))
    }
}

/// What the second pass needs: the input (to place borrowed scalars) and the
/// line of the last node placed.
struct Context<'a> {
    input: &'a str,
    line_starts: Vec<usize>,
    last_line: Cell<usize>,
}

impl Context<'_> {
    /// The byte offset of `text` in the input, when it is a slice of it.
    fn offset_of(&self, text: &str) -> Option<usize> {
        let start = self.input.as_ptr() as usize;
        let at = (text.as_ptr() as usize).checked_sub(start)?;
        let end = at.checked_add(text.len())?;
        (end <= self.input.len() && self.input.get(at..end) == Some(text)).then_some(at)
    }

    fn line_of(&self, offset: usize) -> usize {
        self.line_starts.partition_point(|&start| start <= offset)
    }

    /// Whether the scalar at `offset` is quoted or carries an explicit `!!str` tag.
    fn is_quoted_or_str_tagged(&self, offset: usize) -> bool {
        let before = &self.input.as_bytes()[..offset];
        if matches!(before.last(), Some(b'\'' | b'"')) {
            return true;
        }
        let trimmed = before
            .iter()
            .rposition(|&b| b != b' ' && b != b'\t')
            .map_or(&before[..0], |end| &before[..=end]);
        trimmed.ends_with(b"!!str") || trimmed.ends_with(b"tag:yaml.org,2002:str>")
    }
}

fn line_starts(input: &str) -> Vec<usize> {
    std::iter::once(0)
        .chain(input.match_indices('\n').map(|(at, _)| at + 1))
        .collect()
}

/// Reads one node of a known shape, scalars as text.
struct RawSeed<'s, 'a> {
    shape: &'s Shape,
    context: &'s Context<'a>,
}

impl<'de> DeserializeSeed<'de> for RawSeed<'_, '_> {
    type Value = Node;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Node, D::Error> {
        match self.shape {
            Shape::Scalar => deserializer.deserialize_str(ScalarText {
                context: self.context,
            }),
            Shape::Seq(items) => deserializer.deserialize_seq(Collection {
                shape: self.shape,
                items: items.len(),
                context: self.context,
            }),
            Shape::Map(entries) => deserializer.deserialize_map(Collection {
                shape: self.shape,
                items: entries.len(),
                context: self.context,
            }),
        }
    }
}

struct ScalarText<'s, 'a> {
    context: &'s Context<'a>,
}

impl ScalarText<'_, '_> {
    fn owned(self, text: String) -> Node {
        // Not a slice of the input: a block scalar, a quoted scalar with
        // escapes or a folded multi-line scalar; yaml.v2 reads all of them as
        // strings in practice.
        Node {
            line: self.context.last_line.get(),
            kind: NodeKind::Scalar { text, plain: false },
        }
    }
}

impl<'de> Visitor<'de> for ScalarText<'_, '_> {
    type Value = Node;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("a scalar")
    }

    fn visit_borrowed_str<E: de::Error>(self, text: &'de str) -> Result<Node, E> {
        let context = self.context;
        let Some(offset) = context.offset_of(text) else {
            return Ok(self.owned(text.to_owned()));
        };
        let plain = !context.is_quoted_or_str_tagged(offset);
        let line = if text.is_empty() && plain {
            // An empty plain scalar (`name:`) has no text of its own.
            context.last_line.get()
        } else {
            context.line_of(offset)
        };
        context.last_line.set(line);
        Ok(Node {
            line,
            kind: NodeKind::Scalar {
                text: text.to_owned(),
                plain,
            },
        })
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<Node, E> {
        Ok(self.owned(text.to_owned()))
    }

    fn visit_string<E: de::Error>(self, text: String) -> Result<Node, E> {
        Ok(self.owned(text))
    }
}

struct Collection<'s, 'a> {
    shape: &'s Shape,
    items: usize,
    context: &'s Context<'a>,
}

impl Collection<'_, '_> {
    fn seed<'s>(&self, shape: &'s Shape) -> RawSeed<'s, '_>
    where
        Self: 's,
    {
        RawSeed {
            shape,
            context: self.context,
        }
    }
}

impl<'de> Visitor<'de> for Collection<'_, '_> {
    type Value = Node;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "a collection of {} items", self.items)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Node, A::Error> {
        let Shape::Seq(shapes) = self.shape else {
            return Err(de::Error::custom("the document changed between passes"));
        };
        let before = self.context.last_line.get();
        let mut items = Vec::with_capacity(shapes.len());
        for shape in shapes {
            match seq.next_element_seed(self.seed(shape))? {
                Some(item) => items.push(item),
                None => return Err(de::Error::custom("the document changed between passes")),
            }
        }
        let line = items.first().map_or(before, |item| item.line);
        Ok(Node {
            line,
            kind: NodeKind::Seq(items),
        })
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node, A::Error> {
        let Shape::Map(shapes) = self.shape else {
            return Err(de::Error::custom("the document changed between passes"));
        };
        let before = self.context.last_line.get();
        let mut entries = Vec::with_capacity(shapes.len());
        for (key_shape, value_shape) in shapes {
            let Some(key) = map.next_key_seed(self.seed(key_shape))? else {
                return Err(de::Error::custom("the document changed between passes"));
            };
            let value = map.next_value_seed(self.seed(value_shape))?;
            entries.push((key, value));
        }
        let line = entries.first().map_or(before, |(key, _)| key.line);
        Ok(Node {
            line,
            kind: NodeKind::Map(entries),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scalar(node: &Node) -> (&str, bool, usize) {
        match &node.kind {
            NodeKind::Scalar { text, plain } => (text, *plain, node.line),
            _ => panic!("not a scalar: {node:?}"),
        }
    }

    #[test]
    fn keeps_text_quoting_lines_and_duplicates() {
        let input = "a: 0x10\nb: 'yes'\nb: yes\nc:\n  - \"x\"\n  - |\n    block\n";
        let node = parse_document(input).unwrap().unwrap();
        let NodeKind::Map(entries) = &node.kind else {
            panic!("not a map")
        };
        assert_eq!(entries.len(), 4);
        assert_eq!(scalar(&entries[0].1), ("0x10", true, 1));
        assert_eq!(scalar(&entries[1].1), ("yes", false, 2));
        assert_eq!(scalar(&entries[2].1), ("yes", true, 3));
        let NodeKind::Seq(items) = &entries[3].1.kind else {
            panic!("not a seq")
        };
        assert_eq!(scalar(&items[0]), ("x", false, 5));
        assert_eq!(scalar(&items[1]), ("block\n", false, 5));
    }

    #[test]
    fn empty_input_has_no_document() {
        assert!(parse_document("").unwrap().is_none());
        assert!(parse_document("# only a comment\n").unwrap().is_none());
        assert!(parse_document("---\n").unwrap().unwrap().is_null());
    }

    #[test]
    fn parse_errors_read_like_yaml_v2() {
        assert_eq!(
            parse_document("'''\n").unwrap_err(),
            "yaml: line 2: found unexpected end of stream"
        );
        assert_eq!(
            parse_document("a: b\n c: d\n").unwrap_err(),
            "yaml: line 2: mapping values are not allowed in this context"
        );
    }
}
