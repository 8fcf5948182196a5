//! The debug listener's `/settings` page: every setting in force, one line
//! each, named by its environment variable (`NAME: value`), so that an
//! operator (and the test that starts the binary with the Go service's
//! variables) can see that each variable was read. Credentials are never
//! shown: `REDIS_URL` is the URL the store opens, redacted by
//! `tollgate_redis::redacted_url`;
//! `REDIS_AUTH` says only whether it is set.

use std::time::Duration;

use super::arguments::RlsArguments;
use super::store::StoreSettings;

impl RlsArguments {
    /// Every setting read from the environment (or its flag), as
    /// `NAME: value` lines in the order of the Go service's settings, then
    /// tollgate's: booleans `true`/`false`, durations as Go writes them
    /// (`10s`, `50ms`), unset optional settings empty.
    pub fn settings_dump(&self) -> String {
        let optional = |value: Option<String>| value.unwrap_or_default();
        let lines: Vec<(&str, String)> = vec![
            ("HOST", self.host.clone()),
            ("PORT", self.port.to_string()),
            ("GRPC_HOST", self.grpc_host.clone()),
            ("GRPC_PORT", self.grpc_port.to_string()),
            ("DEBUG_HOST", self.debug_host.clone()),
            ("DEBUG_PORT", self.debug_port.to_string()),
            ("RUNTIME_ROOT", self.runtime_root.display().to_string()),
            ("RUNTIME_SUBDIRECTORY", self.runtime_subdirectory.clone()),
            ("RUNTIME_APPDIRECTORY", self.runtime_appdirectory.clone()),
            (
                "RUNTIME_IGNOREDOTFILES",
                self.runtime_ignoredotfiles.to_string(),
            ),
            ("RUNTIME_WATCH_ROOT", self.runtime_watch_root.to_string()),
            ("MERGE_DOMAIN_CONFIG", self.merge_domain_config.to_string()),
            // As the store takes it: a Go-style host:port made a URL with
            // REDIS_SOCKET_TYPE, REDIS_TYPE and REDIS_TLS.
            (
                "REDIS_URL",
                match self.store_settings() {
                    Ok(StoreSettings::Memory) => String::new(),
                    Ok(settings) => settings.server(),
                    Err(_) => optional(
                        self.redis_url
                            .as_ref()
                            .map(|url| tollgate_redis::redacted_url(url.expose())),
                    ),
                },
            ),
            ("REDIS_TYPE", self.redis_type.clone()),
            ("REDIS_SOCKET_TYPE", self.redis_socket_type.clone()),
            (
                "REDIS_AUTH",
                if self.redis_auth.expose().is_empty() {
                    String::new()
                } else {
                    "(set)".to_owned()
                },
            ),
            (
                "REDIS_SENTINEL_AUTH",
                if self.redis_sentinel_auth.expose().is_empty() {
                    String::new()
                } else {
                    "(set)".to_owned()
                },
            ),
            ("REDIS_TLS", self.redis_tls.to_string()),
            ("REDIS_TLS_CACERT", self.redis_tls_cacert.clone()),
            ("REDIS_TIMEOUT", go_duration(self.redis_timeout)),
            ("CACHE_KEY_PREFIX", self.cache_key_prefix.clone()),
            ("NEAR_LIMIT_RATIO", self.near_limit_ratio.to_string()),
            (
                "STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT",
                self.stop_cache_key_increment_when_overlimit.to_string(),
            ),
            (
                "LOCAL_CACHE_SIZE_IN_BYTES",
                self.local_cache_size_in_bytes.to_string(),
            ),
            ("SHADOW_MODE", self.shadow_mode.to_string()),
            ("QUOTA_MODE", self.quota_mode.to_string()),
            (
                "RESPONSE_DYNAMIC_METADATA",
                self.response_dynamic_metadata.to_string(),
            ),
            (
                "LIMIT_RESPONSE_HEADERS_ENABLED",
                self.limit_response_headers_enabled.to_string(),
            ),
            ("LIMIT_LIMIT_HEADER", self.limit_limit_header.clone()),
            (
                "LIMIT_REMAINING_HEADER",
                self.limit_remaining_header.clone(),
            ),
            ("LIMIT_RESET_HEADER", self.limit_reset_header.clone()),
            (
                "HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED",
                self.healthy_with_at_least_one_config_loaded.to_string(),
            ),
            ("DISABLE_STATS", self.disable_stats.to_string()),
            ("USE_STATSD", self.use_statsd.to_string()),
            ("STATSD_HOST", self.statsd_host.clone()),
            ("STATSD_PORT", self.statsd_port.to_string()),
            (
                "STATS_FLUSH_INTERVAL",
                go_duration(self.stats_flush_interval),
            ),
            ("USE_PROMETHEUS", self.use_prometheus.to_string()),
            ("PROMETHEUS_ADDR", self.prometheus_addr.clone()),
            ("PROMETHEUS_PATH", self.prometheus_path.clone()),
            ("LOG_LEVEL", self.log_level.clone()),
            ("LOG_FORMAT", self.log_format.clone()),
            (
                "TOLLGATE_CONFIG_EXTENSIONS",
                self.config_extensions.to_string(),
            ),
            ("TOLLGATE_ALL_OR_NOTHING", self.all_or_nothing.to_string()),
            (
                "TOLLGATE_RETRY_AFTER_HEADER",
                self.retry_after_header.to_string(),
            ),
            ("TOLLGATE_IETF_HEADERS", self.ietf_headers.to_string()),
            ("TOLLGATE_REFUNDS", self.refunds.to_string()),
            (
                "TOLLGATE_STORE_FAILURE",
                optional(self.store_failure.map(|policy| policy.label().to_owned())),
            ),
            ("TOLLGATE_STORE_TIMEOUT", go_duration(self.store_timeout)),
            (
                "TOLLGATE_WORKERS",
                optional(self.workers.map(|workers| workers.to_string())),
            ),
            ("TOLLGATE_IDLE_TIMEOUT", go_duration(self.idle_timeout)),
        ];
        lines
            .into_iter()
            .map(|(name, value)| format!("{name}: {value}\n"))
            .collect()
    }
}

/// `duration` as Go's `time.Duration.String` writes whole units: `10s`,
/// `50ms`, `1m30s` as `90s` (seconds when whole, else milliseconds, else
/// nanoseconds).
fn go_duration(duration: Duration) -> String {
    if duration.subsec_nanos() == 0 {
        format!("{}s", duration.as_secs())
    } else if duration.as_nanos().is_multiple_of(1_000_000) {
        format!("{}ms", duration.as_millis())
    } else {
        format!("{}ns", duration.as_nanos())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Args as _;

    #[test]
    fn every_environment_variable_has_its_line() {
        let command = RlsArguments::augment_args(clap::Command::new("t"));
        let mut read: Vec<String> = command
            .get_arguments()
            .filter_map(|argument| argument.get_env())
            .map(|name| name.to_string_lossy().into_owned())
            .collect();
        read.sort();
        let dump = RlsArguments::defaults().settings_dump();
        let mut dumped: Vec<String> = dump
            .lines()
            .map(|line| line.split_once(": ").unwrap().0.to_owned())
            .collect();
        dumped.sort();
        assert_eq!(read.len(), 51);
        assert_eq!(dumped, read);
    }

    #[test]
    fn durations_read_as_go_writes_them() {
        assert_eq!(go_duration(Duration::from_secs(10)), "10s");
        assert_eq!(go_duration(Duration::from_millis(50)), "50ms");
        assert_eq!(go_duration(Duration::from_nanos(1500)), "1500ns");
    }
}
