//! `LOG_LEVEL` and `LOG_FORMAT`, read as logrus reads them.

use super::arguments::RlsArguments;
use super::error::SettingsError;

/// How logs are written (`LOG_FORMAT`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFormat {
    /// Human-readable lines (anything but `json`).
    Text,
    /// One JSON object per line (`json`, any case).
    Json,
}

impl RlsArguments {
    /// `LOG_LEVEL` as a `tracing` filter directive (`warn`, ...): logrus's
    /// `ParseLevel` (any case; `warning` is `warn`; `fatal` and `panic` log
    /// errors only).
    ///
    /// # Errors
    ///
    /// [`SettingsError::LogLevel`] for anything else, as the Go service refuses
    /// it at start.
    pub fn log_filter(&self) -> Result<&'static str, SettingsError> {
        match self.log_level.to_ascii_lowercase().as_str() {
            "panic" | "fatal" | "error" => Ok("error"),
            "warn" | "warning" => Ok("warn"),
            "info" => Ok("info"),
            "debug" => Ok("debug"),
            "trace" => Ok("trace"),
            _ => Err(SettingsError::LogLevel(self.log_level.clone())),
        }
    }

    /// `LOG_FORMAT`: JSON for `json` (any case), text otherwise.
    pub fn log_format(&self) -> LogFormat {
        if self.log_format.eq_ignore_ascii_case("json") {
            LogFormat::Json
        } else {
            LogFormat::Text
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_are_logrus_levels() {
        let mut arguments = RlsArguments::defaults();
        assert_eq!(arguments.log_filter().unwrap(), "info");
        arguments.log_level = "Debug".to_owned();
        assert_eq!(arguments.log_filter().unwrap(), "debug");
        arguments.log_level = "loud".to_owned();
        assert!(arguments.log_filter().is_err());
        arguments.log_format = "JSON".to_owned();
        assert_eq!(arguments.log_format(), LogFormat::Json);
    }
}
