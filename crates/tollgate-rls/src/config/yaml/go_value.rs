//! A Go value as yaml.v2 decodes it into an `interface{}`: what the
//! generic decoding makes and Go's `%v` formats.

/// A Go value as yaml.v2 decodes it into an `interface{}`.
#[derive(Clone, Debug)]
pub(crate) enum GoValue {
    /// `nil`.
    Nil,
    /// `bool`.
    Bool(bool),
    /// `int`.
    Int(i64),
    /// `uint64` (an integer above `i64::MAX`).
    Uint(u64),
    /// `float64`.
    Float(f64),
    /// `string`.
    Str(String),
    /// `[]interface{}`.
    Seq(Vec<GoValue>),
    /// `map[interface{}]interface{}`, keys unique, in first-seen order (Go's own
    /// order is random).
    Map(Vec<(GoValue, GoValue)>),
}

impl GoValue {
    /// Go's `==` on two map keys (never true for NaN).
    pub(crate) fn same_key(&self, other: &GoValue) -> bool {
        match (self, other) {
            (GoValue::Nil, GoValue::Nil) => true,
            (GoValue::Bool(a), GoValue::Bool(b)) => a == b,
            (GoValue::Int(a), GoValue::Int(b)) => a == b,
            (GoValue::Uint(a), GoValue::Uint(b)) => a == b,
            (GoValue::Float(a), GoValue::Float(b)) => a == b,
            (GoValue::Str(a), GoValue::Str(b)) => a == b,
            _ => false,
        }
    }
}
