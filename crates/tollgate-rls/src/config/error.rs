//! Configuration errors, worded exactly as envoyproxy/ratelimit words them
//! (`newRateLimitConfigError` in config_impl.go): `<config name>: <message>`.

use tollgate_core::PolicyError;

/// A configuration that cannot be loaded: the file at fault and why.
///
/// Displays as envoyproxy/ratelimit's error does, `<file>: <message>`, e.g.
/// `basic.yaml: config error, unknown key 'ratelimit'`. The file is the name the
/// caller gave it (the Go service uses its runtime key, `config.basic`).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{file}: {kind}")]
pub struct ConfigError {
    /// The name of the file at fault.
    pub file: String,
    /// What is wrong with it.
    pub kind: ConfigErrorKind,
}

/// What is wrong with a configuration file. Every message but those marked
/// "extension" is envoyproxy/ratelimit's own text.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ConfigErrorKind {
    /// The text is not YAML, or a value has the wrong type for its field; the
    /// text is yaml.v2's message (`yaml: line 2: found unexpected end of
    /// stream`, `yaml: unmarshal errors:\n  line 5: cannot unmarshal !!str
    /// `abc` into uint32`). Parse errors come from serde_yaml_ng's libyaml, so
    /// their wording may differ from yaml.v2's in places.
    #[error("error loading config file: {0}")]
    Yaml(String),
    /// A mapping key is not a string (shown with Go's `%v`).
    #[error("config error, key is not of type string: {0}")]
    NonStringKey(String),
    /// A mapping key is not one the service knows.
    #[error("config error, unknown key '{0}'")]
    UnknownKey(String),
    /// A list holds something other than a mapping (shown with Go's `%v`).
    #[error("config error, yaml file contains list of type other than map: {0}")]
    NonMapListElement(String),
    /// A value is of a type the check does not know (a float, or an integer
    /// above 2^63-1).
    #[error("error checking config")]
    UncheckableValue,
    /// The file has no `domain`, or an empty one.
    #[error("config file cannot have empty domain")]
    EmptyDomain,
    /// Another file already has this domain and merging is off.
    #[error("duplicate domain '{0}' in config file")]
    DuplicateDomain(String),
    /// A descriptor without `key`.
    #[error("descriptor has empty key")]
    EmptyKey,
    /// Two descriptors with the same key and value at one level; the text is
    /// the full key, `domain.key_value[.key_value...]`.
    #[error("duplicate descriptor composite key '{0}'")]
    DuplicateDescriptor(String),
    /// `unlimited: true` with a valid `unit`.
    #[error("should not specify rate limit unit when unlimited")]
    UnlimitedWithUnit,
    /// A `unit` that is not second, minute, hour, day, week, month or year.
    #[error("invalid rate limit unit '{0}'")]
    InvalidUnit(String),
    /// A `replaces` entry without a name.
    #[error("should not have an empty replaces entry")]
    EmptyReplaces,
    /// A limit that replaces its own name.
    #[error("replaces should not contain name of same descriptor")]
    ReplacesSelf,
    /// `share_threshold: true` on a descriptor without `*`; the text is the
    /// descriptor's `key_value`.
    #[error(
        "share_threshold can only be used with wildcard values (containing '*'), but found key '{0}'"
    )]
    ShareThresholdWithoutWildcard(String),
    /// Extension: an `algorithm` other than fixed_window, sliding_log, token_bucket.
    #[error("invalid rate limit algorithm '{0}'")]
    InvalidAlgorithm(String),
    /// Extension: a `window` that is not a whole number of seconds, at least one
    /// (`30s`, `5m`, `1h 30m`).
    #[error("invalid rate limit window '{window}': {reason}")]
    InvalidWindow {
        /// The text given.
        window: String,
        /// Why it is refused.
        reason: String,
    },
    /// Extension: both `unit` and `window`.
    #[error("should not specify both rate limit unit and window")]
    UnitAndWindow,
    /// Extension: a `calendar` that is not day, week, month or year, or
    /// given with `unit` or `window`, or `time_zone` / `week_starts`
    /// without it; the text says which.
    #[error("invalid rate limit calendar: {0}")]
    InvalidCalendar(String),
    /// Extension: an `overdraft` of 0 or above 2^53, on a limit of 0, or
    /// deeper than the Redis store computes exactly; the text says which.
    #[error("invalid rate limit overdraft: {0}")]
    InvalidOverdraft(String),
    /// Extension: `unlimited: true` with `window`, `algorithm` or `burst`.
    #[error("should not specify rate limit {0} when unlimited")]
    UnlimitedWithExtension(&'static str),
    /// Extension: the limit is not a valid tollgate policy (a `burst` of 0, or
    /// a burst for an algorithm other than the token bucket).
    #[error("{0}")]
    Policy(PolicyError),
}
