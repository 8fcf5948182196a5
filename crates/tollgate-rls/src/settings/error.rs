//! Why the settings cannot start the service.

/// Settings the service cannot start with.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    /// A setting of the Go service that tollgate does not support, set to a
    /// value that needs it.
    #[error("{name}={value} is not supported by tollgate rls: {reason}")]
    Unsupported {
        /// The environment variable.
        name: &'static str,
        /// Its value (credentials are never shown).
        value: String,
        /// What tollgate offers instead.
        reason: &'static str,
    },
    /// More than one stats sink (`USE_STATSD` is on by default, as in Go).
    #[error(
        "Error: unable to use more than one stats sink at the same time. Set one of \
         USE_DOG_STATSD, USE_STATSD, USE_PROMETHEUS."
    )]
    StatsSinks,
    /// `NEAR_LIMIT_RATIO` is not a finite number.
    #[error("NEAR_LIMIT_RATIO={0} is not a finite number")]
    NearLimitRatio(f32),
    /// `LOG_LEVEL` is not one of logrus's levels.
    #[error("Could not parse log level. not a valid logrus Level: \"{0}\"")]
    LogLevel(String),
    /// `REDIS_TYPE` is not `SINGLE` or `CLUSTER`.
    #[error("Unrecognized redis type {0}")]
    RedisType(String),
    /// `REDIS_SOCKET_TYPE` is not `tcp` or `unix`.
    #[error("REDIS_SOCKET_TYPE={0} is not supported by tollgate rls: use tcp or unix")]
    RedisSocketType(String),
    /// `REDIS_URL` cannot be made into a URL the store reads.
    #[error("REDIS_URL is not usable: {0}")]
    RedisUrl(String),
    /// An address (host and port) that does not parse.
    #[error("{setting}: '{address}' is not an address: {reason}")]
    Address {
        /// The settings named (`HOST`/`PORT`, ...).
        setting: &'static str,
        /// The address as given.
        address: String,
        /// Why.
        reason: String,
    },
}
