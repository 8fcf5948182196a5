//! Where a key's state lives in Redis: `PREFIX:{DIGEST}:s` (the state hash),
//! `PREFIX:{DIGEST}:l` (a sliding log's runs) and `PREFIX:{DIGEST}:tier` (a
//! plan's tier); a plan's further policy `NAME` (a plan written as a list)
//! has `PREFIX:{DIGEST}:s:NAME` and `PREFIX:{DIGEST}:l:NAME`. The digest (the first 16 bytes, in hex, of an HMAC-SHA-256
//! of the key space and the key under the store's key secret, or of their
//! plain SHA-256 without one) is the hash tag, so every key a script touches
//! for one limited key sits in one Redis Cluster slot, and no API key ever
//! appears in Redis. With a secret, someone who can read Redis cannot confirm
//! a guessed API key by hashing it.

use tollgate_core::{KeySpace, key_digest};

/// The Redis keys of one limited key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct KeyNames {
    pub(crate) state: String,
    pub(crate) log: String,
    pub(crate) tier: String,
}

/// Which key space a limited key belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Space {
    /// An API key limited by its plan.
    Plan,
    /// A key limited by a policy given with the request.
    Policy,
}

impl KeyNames {
    /// The names of `key` in `space` under `prefix`, hashed with `secret`
    /// (an HMAC key) when there is one.
    pub(crate) fn new(prefix: &str, space: Space, key: &str, secret: Option<&[u8]>) -> Self {
        let space = match space {
            Space::Plan => KeySpace::Plan,
            Space::Policy => KeySpace::Policy,
        };
        let digest = key_digest(secret, space, key);
        // "PREFIX:{TAG}:" once, then each name's ending (no `format!`: this
        // runs for every limit of every request).
        let mut base = String::with_capacity(prefix.len() + 32 + 8);
        base.push_str(prefix);
        base.push_str(":{");
        for byte in &digest[..16] {
            base.push(char::from_digit(u32::from(byte >> 4), 16).unwrap_or('0'));
            base.push(char::from_digit(u32::from(byte & 15), 16).unwrap_or('0'));
        }
        base.push_str("}:");
        let named = |ending: &str| {
            let mut name = String::with_capacity(base.len() + ending.len());
            name.push_str(&base);
            name.push_str(ending);
            name
        };
        KeyNames {
            state: named("s"),
            log: named("l"),
            tier: named("tier"),
        }
    }
}

impl KeyNames {
    /// `PREFIX:{DIGEST}:f`: the sorted set of the key's in-flight leases
    /// (`RedisSlots`), in the key's slot.
    pub(crate) fn in_flight(&self) -> String {
        let base = self.state.strip_suffix('s').unwrap_or(&self.state);
        let mut name = String::with_capacity(base.len() + 1);
        name.push_str(base);
        name.push('f');
        name
    }

    /// The names of the state of the further policy `name` of the plan
    /// whose names these are: `PREFIX:{DIGEST}:s:NAME` and
    /// `PREFIX:{DIGEST}:l:NAME` (a name is an HTTP token, with no braces, so
    /// the hash tag stays the plan key's). The tier key is the plan's.
    pub(crate) fn further(&self, name: &str) -> KeyNames {
        KeyNames {
            state: format!("{}:{name}", self.state),
            log: format!("{}:{name}", self.log),
            tier: self.tier.clone(),
        }
    }

    /// The hash tag: keys of limits with the same tag sit in one cluster slot.
    pub(crate) fn hash_tag(&self) -> &str {
        let start = self.state.find('{').map_or(0, |at| at + 1);
        let end = self.state[start..]
            .find('}')
            .map_or(self.state.len(), |at| start + at);
        &self.state[start..end]
    }
}

/// The key holding the shared default policy and its generation.
pub(crate) fn config_key(prefix: &str) -> String {
    format!("{prefix}:config")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_share_one_hash_tag_and_hide_the_key() {
        let names = KeyNames::new("tg", Space::Plan, "sk_live_secret", None);
        let tag = |name: &str| name[name.find('{').unwrap()..=name.find('}').unwrap()].to_owned();
        assert_eq!(tag(&names.state), tag(&names.log));
        assert_eq!(tag(&names.state), tag(&names.tier));
        assert_eq!(format!("{{{}}}", names.hash_tag()), tag(&names.state));
        assert_eq!(names.hash_tag().len(), 32);
        assert!(!names.state.contains("secret"));
        assert!(names.state.starts_with("tg:{") && names.state.ends_with("}:s"));
        // The names themselves (Redis holds them: they never change), from
        // Python's hashlib: sha256(b"plan\0sk_live_secret"), and
        // hmac.new(b"k", b"policy\0a", sha256), their first 16 bytes in hex.
        let tag = "a2fcdabf8da5289013f139af00bb52a7";
        assert_eq!(names.state, format!("tg:{{{tag}}}:s"));
        assert_eq!(names.log, format!("tg:{{{tag}}}:l"));
        assert_eq!(names.tier, format!("tg:{{{tag}}}:tier"));
        let keyed = KeyNames::new("p", Space::Policy, "a", Some(b"k"));
        assert_eq!(keyed.state, "p:{5798360512f8c8fe63852f0cc3ce2357}:s");
        // The same text in the two spaces is two keys.
        assert_ne!(
            names,
            KeyNames::new("tg", Space::Policy, "sk_live_secret", None)
        );
    }
}
