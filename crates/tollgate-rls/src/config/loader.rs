//! Reading configuration files: the loader's options and the per-file steps of
//! envoyproxy/ratelimit's `ConfigFileContentToYaml` (parse, check the keys,
//! decode), which the Go service runs on every file before it checks any rule.

use crate::config::document::{YamlRoot, decode_root};
use crate::config::error::{ConfigError, ConfigErrorKind};
use crate::config::validate::validate_keys;
use crate::config::yaml::generic;
use crate::config::yaml::parse::parse_document;

/// How configuration files are loaded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LoaderOptions {
    /// `MERGE_DOMAIN_CONFIG`: files with the same `domain` are merged into one
    /// domain instead of refused as duplicates (a descriptor defined twice is
    /// still an error). Off by default, as in the Go service.
    pub merge_domains: bool,
    /// tollgate's extensions inside `rate_limit`: `algorithm` (`fixed_window`,
    /// `sliding_log`, `token_bucket`), `burst` (token bucket capacity) and
    /// `window` (any length, `30s`, `5m`, instead of `unit`). Off by default:
    /// the Go service refuses those keys (`config error, unknown key
    /// 'algorithm'`), and so does tollgate unless this is on.
    pub extensions: bool,
}

/// A configuration file read and checked on its own, ready to be loaded with
/// the others by [`crate::RateLimitConfig::load`].
#[derive(Clone, Debug)]
pub struct ParsedFile {
    pub(crate) name: String,
    pub(crate) root: YamlRoot,
}

impl ParsedFile {
    /// Reads one file: YAML (the first document only), the key check, then the
    /// typed decoding, with the Go service's errors.
    ///
    /// `name` names the file in errors; the Go service names a file by its
    /// runtime key (`config.basic` for `config/basic.yaml`), its unit tests by
    /// the file name.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] for `name`: [`ConfigErrorKind::Yaml`] for a parse or
    /// type error, or the key check's [`ConfigErrorKind::NonStringKey`],
    /// [`ConfigErrorKind::UnknownKey`], [`ConfigErrorKind::NonMapListElement`],
    /// [`ConfigErrorKind::UncheckableValue`].
    pub fn parse(
        name: &str,
        content: &str,
        options: &LoaderOptions,
    ) -> Result<ParsedFile, ConfigError> {
        let error = |kind| ConfigError {
            file: name.to_owned(),
            kind,
        };
        let node = parse_document(content).map_err(|text| error(ConfigErrorKind::Yaml(text)))?;
        let map = generic::decode_root(node.as_ref())
            .map_err(|text| error(ConfigErrorKind::Yaml(text)))?;
        validate_keys(&map, options.extensions).map_err(error)?;
        let root = decode_root(node.as_ref(), options.extensions)
            .map_err(|text| error(ConfigErrorKind::Yaml(text)))?;
        Ok(ParsedFile {
            name: name.to_owned(),
            root,
        })
    }

    /// The name the file was read under.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The file's `domain` (may be empty: loading refuses it).
    pub fn domain(&self) -> &str {
        &self.root.domain
    }
}
