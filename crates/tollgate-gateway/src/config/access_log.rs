//! `[access_log]`: one line per request (time, method, path, status, route,
//! tier, decision, upstream status, duration, bytes), off by default, to
//! standard output or a file, as JSON or text. The format is documented field
//! by field in `docs/CONFIG.md`.

use std::path::PathBuf;

use serde::Deserialize;

use super::ServeConfigError;

/// The lines held for the writer by default.
pub const DEFAULT_ACCESS_LOG_BUFFER: usize = 16_384;

/// The access log's settings.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct AccessLogConfig {
    /// Whether a line is written per request. Default false.
    #[serde(default)]
    pub enabled: bool,
    /// The file the lines are appended to (created if need be, reopened on
    /// SIGHUP, for logrotate); absent: standard output.
    #[serde(default)]
    pub path: Option<PathBuf>,
    /// `"json"` (the default) or `"text"`.
    #[serde(default)]
    pub format: AccessLogFormat,
    /// The most lines waiting for the writer, at least 1; a line finding
    /// them all taken is dropped and counted
    /// (`tollgate_access_log_dropped_total`). Default 16,384.
    #[serde(default = "default_buffer")]
    pub buffer_lines: usize,
}

impl Default for AccessLogConfig {
    fn default() -> Self {
        AccessLogConfig {
            enabled: false,
            path: None,
            format: AccessLogFormat::default(),
            buffer_lines: DEFAULT_ACCESS_LOG_BUFFER,
        }
    }
}

/// The form of an access log line.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum AccessLogFormat {
    /// One JSON object per line (the default).
    #[default]
    Json,
    /// `name=value` pairs separated by spaces (logfmt), `-` for none.
    Text,
}

/// The most lines `buffer_lines` may hold (2^20).
pub const MAX_ACCESS_LOG_BUFFER: usize = 1 << 20;

fn default_buffer() -> usize {
    DEFAULT_ACCESS_LOG_BUFFER
}

impl AccessLogConfig {
    pub(super) fn validate(&self) -> Result<(), ServeConfigError> {
        // The channel takes its whole buffer at start: a typo must not ask
        // for gigabytes.
        if !(1..=MAX_ACCESS_LOG_BUFFER).contains(&self.buffer_lines) {
            return Err(ServeConfigError::Invalid(format!(
                "access_log.buffer_lines must be from 1 to {MAX_ACCESS_LOG_BUFFER}, got {}",
                self.buffer_lines
            )));
        }
        if self
            .path
            .as_ref()
            .is_some_and(|path| path.as_os_str().is_empty())
        {
            return Err(ServeConfigError::Invalid(
                "access_log.path must not be empty (leave it out for standard output)".to_owned(),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::config::ServeConfig;

    #[test]
    fn a_path_without_enabled_is_warned_about() {
        let warnings = |toml: &str| ServeConfig::from_toml_str(toml).unwrap().warnings();
        let expected = "access_log.path is set but access_log.enabled is not: no access log \
                        is written (set enabled = true)"
            .to_owned();
        assert!(warnings("[access_log]\npath = \"/tmp/a.log\"\n").contains(&expected));
        assert!(
            !warnings("[access_log]\nenabled = true\npath = \"/tmp/a.log\"\n").contains(&expected)
        );
    }

    #[test]
    fn the_buffer_holds_1_to_2_pow_20_lines() {
        let error = |lines: &str| {
            ServeConfig::from_toml_str(&format!("[access_log]\nbuffer_lines = {lines}\n"))
                .err()
                .map(|error| error.to_string())
        };
        assert_eq!(error("1"), None);
        assert_eq!(error("1048576"), None);
        for (lines, got) in [
            ("0", "0"),
            ("1048577", "1048577"),
            ("100000000", "100000000"),
        ] {
            let message = error(lines).expect("refused");
            assert!(
                message.contains(&format!(
                    "access_log.buffer_lines must be from 1 to 1048576, got {got}"
                )),
                "{message}"
            );
        }
    }
}
