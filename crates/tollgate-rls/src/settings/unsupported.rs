//! The Go service's settings that tollgate does not support: each is refused
//! at start, by name, when set to a value that would need it, rather than
//! silently ignored.

use super::error::SettingsError;

/// A setting of envoyproxy/ratelimit that tollgate does not support.
#[derive(Clone, Copy, Debug)]
pub struct Unsupported {
    /// The environment variable.
    pub name: &'static str,
    /// Whether a value is still fine (a default, or what tollgate does anyway).
    pub accepts: fn(&str) -> bool,
    /// What tollgate offers instead.
    pub reason: &'static str,
}

fn empty(value: &str) -> bool {
    value.is_empty()
}

fn false_or_empty(value: &str) -> bool {
    matches!(value, "" | "0" | "f" | "F" | "false" | "FALSE" | "False")
}

/// The settings refused when set (read from the environment only: none of
/// them has a flag).
pub const UNSUPPORTED: &[Unsupported] = &[
    Unsupported {
        name: "BACKEND_TYPE",
        accepts: |value| matches!(value, "" | "redis"),
        reason: "tollgate keeps limits in Redis (REDIS_URL) or in memory; memcache is not supported",
    },
    Unsupported {
        name: "CONFIG_TYPE",
        accepts: |value| matches!(value, "" | "FILE"),
        reason: "configuration comes from files only (FILE); xDS (GRPC_XDS_SOTW) is not supported",
    },
    Unsupported {
        name: "CONFIG_GRPC_XDS_SERVER_URL",
        accepts: |value| matches!(value, "" | "localhost:18000"),
        reason: "xDS configuration is not supported",
    },
    Unsupported {
        name: "GRPC_UDS",
        accepts: empty,
        reason: "the gRPC listener is TCP only (GRPC_HOST, GRPC_PORT)",
    },
    Unsupported {
        name: "GRPC_SERVER_USE_TLS",
        accepts: false_or_empty,
        reason: "the listeners have no TLS; terminate TLS in front of the service",
    },
    Unsupported {
        name: "REDIS_PERSECOND",
        accepts: false_or_empty,
        reason: "one store holds every limit; a second Redis for per-second limits is not supported",
    },
    Unsupported {
        name: "REDIS_PERSECOND_URL",
        accepts: |value| matches!(value, "" | "/var/run/nutcracker/ratelimitpersecond.sock"),
        reason: "one store holds every limit; a second Redis for per-second limits is not supported",
    },
    Unsupported {
        name: "REDIS_POOL_ON_EMPTY_BEHAVIOR",
        accepts: |value| value.is_empty() || value.eq_ignore_ascii_case("WAIT"),
        reason: "calls wait for a connection (WAIT), as the Go service's radix v4 does",
    },
    Unsupported {
        name: "REDIS_TLS_CLIENT_CERT",
        accepts: empty,
        reason: "client certificates for Redis are not supported (REDIS_TLS with \
                 REDIS_TLS_CACERT checks the server only)",
    },
    Unsupported {
        name: "REDIS_TLS_CLIENT_KEY",
        accepts: empty,
        reason: "client certificates for Redis are not supported (REDIS_TLS with \
                 REDIS_TLS_CACERT checks the server only)",
    },
    Unsupported {
        name: "REDIS_TLS_SKIP_HOSTNAME_VERIFICATION",
        accepts: false_or_empty,
        reason: "Redis's certificate is always checked against its host name; give its CA \
                 with REDIS_TLS_CACERT",
    },
    Unsupported {
        name: "MEMCACHE_HOST_PORT",
        accepts: empty,
        reason: "memcache is not supported",
    },
    Unsupported {
        name: "MEMCACHE_SRV",
        accepts: empty,
        reason: "memcache is not supported",
    },
    Unsupported {
        name: "USE_DOG_STATSD",
        accepts: false_or_empty,
        reason: "stats go to statsd (USE_STATSD) or Prometheus (USE_PROMETHEUS)",
    },
    Unsupported {
        name: "EXTRA_TAGS",
        accepts: empty,
        reason: "stats carry no extra tags",
    },
    Unsupported {
        name: "PROMETHEUS_MAPPER_YAML",
        accepts: empty,
        reason: "Prometheus names are the statsd names made valid; no mapper",
    },
    Unsupported {
        name: "TRACING_ENABLED",
        accepts: false_or_empty,
        reason: "OpenTelemetry tracing is not supported",
    },
];

/// Refuses the first setting of [`UNSUPPORTED`] that `get` (an environment
/// lookup, `std::env::var(name).ok()` for the process's) says is set to a
/// value tollgate would have to ignore.
///
/// # Errors
///
/// [`SettingsError::Unsupported`] naming the setting, its value and what
/// tollgate does instead.
pub fn refuse_unsupported(get: impl Fn(&str) -> Option<String>) -> Result<(), SettingsError> {
    for setting in UNSUPPORTED {
        if let Some(value) = get(setting.name)
            && !(setting.accepts)(&value)
        {
            let value = if setting.name.contains("AUTH") {
                "<redacted>".to_owned()
            } else {
                value
            };
            return Err(SettingsError::Unsupported {
                name: setting.name,
                value,
                reason: setting.reason,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(pairs: &[(&str, &str)]) -> Result<(), SettingsError> {
        refuse_unsupported(|name| {
            pairs
                .iter()
                .find(|(key, _)| *key == name)
                .map(|(_, value)| (*value).to_owned())
        })
    }

    #[test]
    fn defaults_and_unset_pass() {
        assert!(check(&[]).is_ok());
        assert!(
            check(&[
                ("BACKEND_TYPE", "redis"),
                ("CONFIG_TYPE", "FILE"),
                ("REDIS_PERSECOND", "false"),
                ("REDIS_POOL_ON_EMPTY_BEHAVIOR", "wait"),
            ])
            .is_ok()
        );
    }

    #[test]
    fn unsupported_settings_are_named() {
        let error = check(&[("BACKEND_TYPE", "memcache")])
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with("BACKEND_TYPE=memcache is not supported"),
            "{error}"
        );
        let error = check(&[("CONFIG_TYPE", "GRPC_XDS_SOTW")])
            .unwrap_err()
            .to_string();
        assert!(error.contains("CONFIG_TYPE=GRPC_XDS_SOTW") && error.contains("xDS"));
        assert!(check(&[("TRACING_ENABLED", "true")]).is_err());
    }
}
