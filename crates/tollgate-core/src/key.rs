//! API keys: how a raw credential becomes the key that is limited, and how a key
//! is shown in logs without revealing it.

use std::fmt;

/// A present, non-empty API key, borrowed from the text it was parsed from.
///
/// Parsing follows the operations contract: surrounding whitespace is ignored; a
/// leading `Bearer` (any case) followed by whitespace is stripped together with
/// that whitespace; what is left is the key, compared case-sensitively. An empty
/// key or the word `Bearer` alone is a missing key.
///
/// ```
/// use tollgate_core::ApiKey;
///
/// assert_eq!(ApiKey::parse("  BEARER   sk_c ").unwrap().as_str(), "sk_c");
/// assert_eq!(ApiKey::parse("SK_A").unwrap().as_str(), "SK_A");
/// assert!(ApiKey::parse("bearer   ").is_none());
/// assert!(ApiKey::parse("").is_none());
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct ApiKey<'a>(&'a str);

impl fmt::Debug for ApiKey<'_> {
    /// Redacted: keys never appear in full in logs.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ApiKey({})", self.redacted())
    }
}

const BEARER: &str = "bearer";

impl<'a> ApiKey<'a> {
    /// Parses a raw credential; `None` when the key is missing.
    pub fn parse(raw: &'a str) -> Option<Self> {
        let trimmed = raw.trim();
        let key = match trimmed.get(..BEARER.len()) {
            Some(word) if word.eq_ignore_ascii_case(BEARER) => {
                let rest = &trimmed[BEARER.len()..];
                if rest.is_empty() {
                    return None;
                }
                if rest.starts_with(char::is_whitespace) {
                    rest.trim_start()
                } else {
                    trimmed
                }
            }
            _ => trimmed,
        };
        (!key.is_empty()).then_some(ApiKey(key))
    }

    /// The key itself.
    pub fn as_str(&self) -> &'a str {
        self.0
    }

    /// A form of the key safe for logs and metrics: see [`Redacted`].
    pub fn redacted(&self) -> Redacted<'a> {
        Redacted(self.0)
    }
}

/// A key shown without revealing it: its first four characters (at most half of
/// it), an ellipsis and its length, such as `sk_l…(32)`.
#[derive(Clone, Copy, Debug)]
pub struct Redacted<'a>(pub &'a str);

impl fmt::Display for Redacted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let length = self.0.chars().count();
        let shown = (length / 2).min(4);
        let prefix: String = self.0.chars().take(shown).collect();
        write!(f, "{prefix}…({length})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(raw: &str) -> Option<&str> {
        ApiKey::parse(raw).map(|key| key.as_str())
    }

    #[test]
    fn strips_one_bearer_and_whitespace() {
        assert_eq!(parsed("Bearer sk_a"), Some("sk_a"));
        assert_eq!(parsed("bearer\t\n sk_b"), Some("sk_b"));
        assert_eq!(parsed("Bearersk_a"), Some("Bearersk_a"));
        assert_eq!(parsed("Bearer Bearer x"), Some("Bearer x"));
        assert_eq!(parsed("   "), None);
        assert_eq!(parsed("Bearer"), None);
        assert_eq!(parsed("BEARER \u{a0}"), None);
        assert_eq!(parsed("Beär"), Some("Beär"));
    }

    #[test]
    fn redaction_hides_the_key() {
        assert_eq!(Redacted("sk_live_0123456789").to_string(), "sk_l…(18)");
        assert_eq!(Redacted("abc").to_string(), "a…(3)");
        assert_eq!(Redacted("").to_string(), "…(0)");
    }
}
