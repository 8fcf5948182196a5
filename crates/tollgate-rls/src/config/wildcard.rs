//! `*` patterns in descriptor keys, matched as envoyproxy/ratelimit's
//! `wildcardMatch` does: the pattern is the whole `key_value` text split on `*`;
//! each `*` matches any run of characters, possibly empty; the first part must
//! start the text, the last end it, and the middle parts appear in order,
//! leftmost first.

/// A descriptor key with at least one `*`, split once at load time.
#[derive(Clone, Debug)]
pub(crate) struct WildcardEntry {
    /// The full descriptor key, `key_value`, e.g. `path_bar*baz*qux`.
    pub(crate) key: String,
    /// The key split on `*`, e.g. `["path_bar", "baz", "qux"]`.
    parts: Vec<String>,
}

impl WildcardEntry {
    /// The entry for `key`, which contains a `*`.
    pub(crate) fn new(key: &str) -> WildcardEntry {
        WildcardEntry {
            key: key.to_owned(),
            parts: key.split('*').map(str::to_owned).collect(),
        }
    }

    /// Whether `text` (a request's `key_value`) matches the pattern.
    pub(crate) fn matches(&self, text: &str) -> bool {
        let parts = &self.parts;
        let (Some(first), Some(last)) = (parts.first(), parts.last()) else {
            return false;
        };
        if parts.len() == 1 {
            return first == text;
        }
        if !text.starts_with(first.as_str()) || !text.ends_with(last.as_str()) {
            return false;
        }
        let fixed: usize = parts.iter().map(String::len).sum();
        if text.len() < fixed {
            return false;
        }
        let Some(mut remaining) = text.get(first.len()..text.len() - last.len()) else {
            return false;
        };
        for part in &parts[1..parts.len() - 1] {
            match remaining.find(part.as_str()) {
                Some(at) => remaining = &remaining[at + part.len()..],
                None => return false,
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::WildcardEntry;

    #[test]
    fn matches_as_the_go_service() {
        let trailing = WildcardEntry::new("wild_foo*");
        assert!(trailing.matches("wild_foo"));
        assert!(trailing.matches("wild_foo1"));
        assert!(!trailing.matches("wild_fo"));
        let middle = WildcardEntry::new("midWild_bar*b");
        assert!(middle.matches("midWild_bar123b"));
        assert!(middle.matches("midWild_barb"));
        assert!(!middle.matches("midWild_bara"));
        let multi = WildcardEntry::new("multiWild_foo*bar*baz");
        assert!(multi.matches("multiWild_foo123bar456baz"));
        assert!(multi.matches("multiWild_foobarbaz"));
        assert!(!multi.matches("multiWild_foo123baz"));
        let overlapping = WildcardEntry::new("k_ab*ba");
        assert!(!overlapping.matches("k_aba"));
        assert!(overlapping.matches("k_abba"));
    }
}
