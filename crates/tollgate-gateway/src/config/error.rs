//! [`ServeConfigError`]: why a configuration cannot be used.

use tollgate_core::ConfigError;

/// A configuration that cannot be used. Its text names the setting, never a
/// key, a token or a URL.
#[derive(Debug, thiserror::Error)]
pub enum ServeConfigError {
    /// The file could not be read.
    #[error("cannot read it: {0}")]
    Read(std::io::Error),
    /// A problem in a file, named.
    #[error("{path}: {reason}")]
    File {
        /// The file.
        path: String,
        /// The problem.
        reason: Box<ServeConfigError>,
    },
    /// TOML syntax or shape, on one line naming the line and column.
    #[error("invalid configuration: {0}")]
    Toml(String),
    /// The limits are invalid.
    #[error("{0}")]
    Limits(ConfigError),
    /// A route is invalid.
    #[error("route {route}: {reason}")]
    Route {
        /// The route: `NAME (PREFIX)`, or its prefix when it has no name.
        route: String,
        /// What is wrong.
        reason: String,
    },
    /// A tenant's key list is invalid.
    #[error("tenants: {0}")]
    Tenants(String),
    /// Another setting is invalid.
    #[error("{0}")]
    Invalid(String),
}

impl From<ConfigError> for ServeConfigError {
    fn from(error: ConfigError) -> Self {
        ServeConfigError::Limits(error)
    }
}
