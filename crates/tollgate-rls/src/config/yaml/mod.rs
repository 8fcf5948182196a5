//! YAML as envoyproxy/ratelimit reads it with gopkg.in/yaml.v2: the node tree
//! ([`node`]), its reading with serde_yaml_ng ([`parse`]), YAML 1.1 scalar
//! resolution ([`resolve`]), the generic decoding into Go values that the key
//! validation walks ([`generic`]), Go's `%v` text of those values ([`gofmt`]) and
//! the typed decoding with yaml.v2's type errors ([`decode`]).

pub(crate) mod decode;
pub(crate) mod generic;
pub(crate) mod go_value;
pub(crate) mod gofmt;
pub(crate) mod node;
pub(crate) mod parse;
pub(crate) mod resolve;
