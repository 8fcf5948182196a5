//! `[keys]`: the file of API keys that exist (`known`) and what a request
//! with another key gets (`unknown`), and reading that file
//! ([`load_known_keys`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;
use tollgate_core::{KnownKeys, UnknownKeys};

use super::ServeConfigError;

/// `[keys]`. tollgate does not authenticate keys; a list of the keys that
/// exist stops a client from inventing keys for fresh budgets.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeysConfig {
    /// A file of the keys that exist, one per line: the key, or
    /// `sha256:` and its digest in hexadecimal. Read at start, on SIGHUP and
    /// on reload. Default: no list.
    #[serde(default)]
    pub known: Option<PathBuf>,
    /// What a request whose key is not in `known` gets. Default `"allow"`.
    #[serde(default)]
    pub unknown: UnknownKeys,
}

impl KeysConfig {
    pub(super) fn validate(&self) -> Result<(), ServeConfigError> {
        if self.known.is_none() && self.unknown != UnknownKeys::Allow {
            return Err(ServeConfigError::Invalid(
                "keys.unknown needs keys.known: the file of the keys that exist".into(),
            ));
        }
        Ok(())
    }
}

/// Reads the file of known keys `[keys] known` names, if it names one.
///
/// # Errors
///
/// [`ServeConfigError::File`] naming the file and, for a bad line, its
/// number (never the key written there).
pub fn load_known_keys(config: &KeysConfig) -> Result<Option<Arc<KnownKeys>>, ServeConfigError> {
    let Some(path) = &config.known else {
        return Ok(None);
    };
    read_known_keys(path).map(|keys| Some(Arc::new(keys)))
}

/// What a list of known keys read holds, for the log and `check-config`:
/// the line giving its count and memory (bytes), and the warning due when
/// it lists no key while unknown keys are refused (every request with a key
/// would then be refused).
pub fn known_keys_report(known: &KnownKeys, unknown: UnknownKeys) -> (String, Option<String>) {
    let line = format!(
        "known keys: {} listed, {} bytes in memory",
        known.len(),
        known.memory_bytes()
    );
    let warning = (known.is_empty() && unknown == UnknownKeys::Refuse).then(|| {
        "the file of known keys lists no key, and keys.unknown = \"refuse\": every request \
         with an API key is refused (401)"
            .to_owned()
    });
    (line, warning)
}

fn read_known_keys(path: &Path) -> Result<KnownKeys, ServeConfigError> {
    let in_file = |reason| ServeConfigError::File {
        path: format!("keys.known {}", path.display()),
        reason: Box::new(reason),
    };
    let bytes = tollgate_serve::read_regular_file(path, KNOWN_KEYS_MAX_BYTES).map_err(|error| {
        in_file(ServeConfigError::Read(match error {
            tollgate_serve::FileError::Io(error) => error,
            other => std::io::Error::other(other),
        }))
    })?;
    KnownKeys::parse(&bytes).map_err(|error| in_file(ServeConfigError::Invalid(error.to_string())))
}

/// The largest file of known keys read: 256 MiB, room for three million
/// `sha256:` lines.
pub const KNOWN_KEYS_MAX_BYTES: u64 = 256 * 1024 * 1024;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ServeConfig;

    #[test]
    fn unknown_needs_a_list() {
        let error = ServeConfig::from_toml_str("[keys]\nunknown = \"refuse\"")
            .unwrap_err()
            .to_string();
        assert_eq!(
            error,
            "keys.unknown needs keys.known: the file of the keys that exist"
        );
        let config = ServeConfig::from_toml_str(
            "[keys]\nknown = \"/k\"\nunknown = \"anonymous\"\n[host]\nip = { rpm = 60 }",
        )
        .unwrap();
        assert_eq!(config.keys.unknown, UnknownKeys::Anonymous);
        let error = ServeConfig::from_toml_str("[keys]\nknown = \"/k\"\nunknown = \"maybe\"")
            .unwrap_err()
            .to_string();
        assert!(error.contains("unknown variant `maybe`"), "{error}");
    }

    #[test]
    fn a_bad_file_is_named_with_its_line_never_its_keys() {
        let directory = std::env::temp_dir().join(format!("tollgate-known-{}", std::process::id()));
        std::fs::create_dir_all(&directory).unwrap();
        let path = directory.join("keys.txt");
        std::fs::write(&path, "sk_secret_one\nsha256:12ab\n").unwrap();
        let config = KeysConfig {
            known: Some(path.clone()),
            unknown: UnknownKeys::Refuse,
        };
        let error = load_known_keys(&config).unwrap_err().to_string();
        assert!(error.contains("line 2"), "{error}");
        assert!(
            !error.contains("sk_secret_one") && !error.contains("12ab"),
            "{error}"
        );
        std::fs::write(&path, b"sk_a\n\xfe\n").unwrap();
        let error = load_known_keys(&config).unwrap_err().to_string();
        assert!(error.contains("not UTF-8 text (line 2)"), "{error}");
        std::fs::write(&path, "sk_a\nsk_b\n").unwrap();
        assert_eq!(load_known_keys(&config).unwrap().unwrap().len(), 2);
        std::fs::remove_dir_all(&directory).unwrap();
        assert!(load_known_keys(&config).is_err());
    }
}
