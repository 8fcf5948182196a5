//! [`RlsArguments`]: every setting tollgate shares with envoyproxy/ratelimit, as
//! a clap flag that also reads the Go service's environment variable.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, CommandFactory as _, FromArgMatches as _, Parser};

use super::error::SettingsError;
use super::secret::Secret;

/// The most gRPC worker threads (`TOLLGATE_WORKERS`).
pub(crate) const MAX_WORKERS: usize = tollgate_serve::MAX_WORKERS;

/// `tollgate rls`'s settings. Each flag also reads the environment variable of
/// envoyproxy/ratelimit's `settings.go` named in its help (`PORT`, `REDIS_URL`,
/// ...), with the Go service's default; a flag given wins over its variable.
///
/// Booleans read Go's `strconv.ParseBool` spellings (`1 t T TRUE true True`,
/// `0 f F FALSE false False`); a bare `--flag` means true. Durations are Go
/// durations (`10s`, `1m30s`, `250ms`).
#[derive(Clone, Debug, PartialEq, Args)]
pub struct RlsArguments {
    /// Address of the HTTP listener (`POST /json`, `GET /healthcheck`).
    #[arg(long, env = "HOST", default_value = "0.0.0.0", value_name = "HOST")]
    pub host: String,
    /// Port of the HTTP listener.
    #[arg(long, env = "PORT", default_value_t = 8080, value_name = "PORT")]
    pub port: u16,
    /// Address of the gRPC listener (`ShouldRateLimit`, `grpc.health.v1`).
    #[arg(
        long,
        env = "GRPC_HOST",
        default_value = "0.0.0.0",
        value_name = "HOST"
    )]
    pub grpc_host: String,
    /// Port of the gRPC listener.
    #[arg(long, env = "GRPC_PORT", default_value_t = 8081, value_name = "PORT")]
    pub grpc_port: u16,
    /// Address of the debug listener (`/stats`, `/rlconfig`).
    #[arg(
        long,
        env = "DEBUG_HOST",
        default_value = "0.0.0.0",
        value_name = "HOST"
    )]
    pub debug_host: String,
    /// Port of the debug listener.
    #[arg(long, env = "DEBUG_PORT", default_value_t = 6070, value_name = "PORT")]
    pub debug_port: u16,

    /// Read the configuration files from DIR itself (every file, recursively;
    /// dot files and directories, such as a ConfigMap's `..data`, skipped),
    /// named `config.<path>` in errors, instead of from the `RUNTIME_*`
    /// directories. A tollgate extension.
    #[arg(long, value_name = "DIR")]
    pub config: Option<PathBuf>,
    /// The runtime root: configuration files are
    /// `RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY/*`.
    #[arg(
        long,
        env = "RUNTIME_ROOT",
        default_value = "/srv/runtime_data/current",
        value_name = "DIR"
    )]
    pub runtime_root: PathBuf,
    /// The runtime subdirectory. Empty (the default) means no configuration
    /// at all when `RUNTIME_WATCH_ROOT` is true, as in the Go service.
    #[arg(
        long,
        env = "RUNTIME_SUBDIRECTORY",
        default_value = "",
        value_name = "DIR"
    )]
    pub runtime_subdirectory: String,
    /// The directory of the configuration files inside the subdirectory.
    #[arg(
        long,
        env = "RUNTIME_APPDIRECTORY",
        default_value = "config",
        value_name = "DIR"
    )]
    pub runtime_appdirectory: String,
    /// Skip files and directories whose name starts with `.` (set it for a
    /// Kubernetes ConfigMap, whose `..<timestamp>` directory would otherwise
    /// be read too).
    #[arg(long, env = "RUNTIME_IGNOREDOTFILES", value_parser = go_bool, num_args = 0..=1,
        default_value = "false", default_missing_value = "true", value_name = "BOOL")]
    pub runtime_ignoredotfiles: bool,
    /// Name files by their path under `RUNTIME_SUBDIRECTORY` (`config.x.yaml`)
    /// and keep those of `RUNTIME_APPDIRECTORY`; false names them by their path
    /// under `RUNTIME_APPDIRECTORY` (`x.yaml`). tollgate reloads on any change
    /// of the files' contents either way.
    #[arg(long, env = "RUNTIME_WATCH_ROOT", value_parser = go_bool, num_args = 0..=1,
        default_value = "true", default_missing_value = "true", value_name = "BOOL")]
    pub runtime_watch_root: bool,
    /// Merge files with the same `domain` instead of refusing the duplicate.
    #[arg(long, env = "MERGE_DOMAIN_CONFIG", value_parser = go_bool, num_args = 0..=1,
        default_value = "false", default_missing_value = "true", value_name = "BOOL")]
    pub merge_domain_config: bool,
    /// Accept tollgate's extensions in `rate_limit` (`algorithm`, `burst`,
    /// `window`), which the Go service refuses. A tollgate extension.
    #[arg(long, env = "TOLLGATE_CONFIG_EXTENSIONS", value_parser = go_bool, num_args = 0..=1,
        default_value = "false", default_missing_value = "true", value_name = "BOOL")]
    pub config_extensions: bool,

    /// Where limits are kept: unset keeps them in memory (one process); a
    /// Go-style `host:port` (with `REDIS_SOCKET_TYPE=tcp`), a socket path
    /// (`unix`), `host:port,host:port` for `REDIS_TYPE=cluster`, or a
    /// `redis://` / `redis-cluster://` URL (`rediss://`, `rediss-cluster://`
    /// over TLS).
    #[arg(long, env = "REDIS_URL", hide_env_values = true, value_name = "URL")]
    pub redis_url: Option<Secret>,
    /// `SINGLE`, `CLUSTER` or `SENTINEL` (any case; with `SENTINEL`,
    /// `REDIS_URL` is `MASTER_NAME,host:port,...`, the sentinels).
    #[arg(
        long,
        env = "REDIS_TYPE",
        default_value = "SINGLE",
        value_name = "TYPE"
    )]
    pub redis_type: String,
    /// How a Go-style `REDIS_URL` is reached: `tcp` or `unix` (Go's default).
    /// A `redis://` URL needs neither.
    #[arg(
        long,
        env = "REDIS_SOCKET_TYPE",
        default_value = "unix",
        value_name = "TYPE"
    )]
    pub redis_socket_type: String,
    /// Redis credentials: `password` or `user:password`.
    #[arg(
        long,
        env = "REDIS_AUTH",
        default_value = "",
        hide_env_values = true,
        value_name = "AUTH"
    )]
    pub redis_auth: Secret,
    /// The sentinels' credentials with `REDIS_TYPE=sentinel`: `password` or
    /// `user:password`.
    #[arg(
        long,
        env = "REDIS_SENTINEL_AUTH",
        default_value = "",
        hide_env_values = true,
        value_name = "AUTH"
    )]
    pub redis_sentinel_auth: Secret,
    /// TLS to Redis (rustls): a `host:port` or `redis://` `REDIS_URL` is
    /// reached as `rediss://` (`rediss-cluster://` for a cluster).
    #[arg(long, env = "REDIS_TLS", value_parser = go_bool, num_args = 0..=1,
        default_value = "false", default_missing_value = "true", value_name = "BOOL")]
    pub redis_tls: bool,
    /// With TLS, a PEM file of the CA certificates Redis's certificate must
    /// chain to, in place of the system's root certificates.
    #[arg(
        long,
        env = "REDIS_TLS_CACERT",
        default_value = "",
        value_name = "FILE"
    )]
    pub redis_tls_cacert: String,
    /// How long one Redis call may take.
    #[arg(long, env = "REDIS_TIMEOUT", value_parser = go_duration, default_value = "10s",
        value_name = "DURATION")]
    pub redis_timeout: Duration,
    /// Prefix of every counter key in the store.
    #[arg(
        long,
        env = "CACHE_KEY_PREFIX",
        default_value = "",
        value_name = "PREFIX"
    )]
    pub cache_key_prefix: String,
    /// Share of a limit past which hits count as `near_limit`.
    #[arg(
        long,
        env = "NEAR_LIMIT_RATIO",
        default_value_t = 0.8,
        value_name = "RATIO"
    )]
    pub near_limit_ratio: f32,
    /// Do not count hits of a key already over its limit.
    #[arg(long, env = "STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", value_parser = go_bool,
        num_args = 0..=1, default_value = "false", default_missing_value = "true",
        value_name = "BOOL")]
    pub stop_cache_key_increment_when_overlimit: bool,
    /// Bytes of the local cache of keys known to be over their limit (0: none).
    #[arg(
        long,
        env = "LOCAL_CACHE_SIZE_IN_BYTES",
        default_value_t = 0,
        value_name = "BYTES"
    )]
    pub local_cache_size_in_bytes: u64,

    /// Answer OK whatever the limits say (counting `global_shadow_mode`).
    #[arg(long, env = "SHADOW_MODE", value_parser = go_bool, num_args = 0..=1,
        default_value = "false", default_missing_value = "true", value_name = "BOOL")]
    pub shadow_mode: bool,
    /// Global quota mode: a request is OVER_LIMIT only when every quota
    /// descriptor is over its limit.
    #[arg(long, env = "QUOTA_MODE", value_parser = go_bool, num_args = 0..=1,
        default_value = "false", default_missing_value = "true", value_name = "BOOL")]
    pub quota_mode: bool,
    /// Put the request's descriptors and the limits' metadata in the
    /// response's `dynamic_metadata`.
    #[arg(long, env = "RESPONSE_DYNAMIC_METADATA", value_parser = go_bool, num_args = 0..=1,
        default_value = "false", default_missing_value = "true", value_name = "BOOL")]
    pub response_dynamic_metadata: bool,
    /// Add the limit, remaining and reset headers (names below) of the
    /// descriptor closest to its limit to the response.
    #[arg(long, env = "LIMIT_RESPONSE_HEADERS_ENABLED", value_parser = go_bool,
        num_args = 0..=1, default_value = "false", default_missing_value = "true",
        value_name = "BOOL")]
    pub limit_response_headers_enabled: bool,
    /// Name of the limit header.
    #[arg(
        long,
        env = "LIMIT_LIMIT_HEADER",
        default_value = "RateLimit-Limit",
        value_name = "NAME"
    )]
    pub limit_limit_header: String,
    /// Name of the remaining header.
    #[arg(
        long,
        env = "LIMIT_REMAINING_HEADER",
        default_value = "RateLimit-Remaining",
        value_name = "NAME"
    )]
    pub limit_remaining_header: String,
    /// Name of the reset header (seconds until the window ends).
    #[arg(
        long,
        env = "LIMIT_RESET_HEADER",
        default_value = "RateLimit-Reset",
        value_name = "NAME"
    )]
    pub limit_reset_header: String,

    /// A request is all or nothing across its descriptors: a refused request
    /// uses no descriptor's budget (the Go service charges every descriptor).
    /// A tollgate extension.
    #[arg(long, env = "TOLLGATE_ALL_OR_NOTHING", value_parser = go_bool, num_args = 0..=1,
        default_value = "false", default_missing_value = "true", value_name = "BOOL")]
    pub all_or_nothing: bool,
    /// Add `Retry-After` to OVER_LIMIT answers. A tollgate extension.
    #[arg(long, env = "TOLLGATE_RETRY_AFTER_HEADER", value_parser = go_bool, num_args = 0..=1,
        default_value = "false", default_missing_value = "true", value_name = "BOOL")]
    pub retry_after_header: bool,
    /// Add the IETF `RateLimit-Policy` and `RateLimit` fields to every answer.
    /// A tollgate extension.
    #[arg(long, env = "TOLLGATE_IETF_HEADERS", value_parser = go_bool, num_args = 0..=1,
        default_value = "false", default_missing_value = "true", value_name = "BOOL")]
    pub ietf_headers: bool,
    /// Give back the hits of a descriptor sent with `is_negative_hits`
    /// instead of charging them (answered OK, counted in `refunded_hits`).
    /// A tollgate extension; the Go service charges them.
    #[arg(long, env = "TOLLGATE_REFUNDS", value_parser = go_bool, num_args = 0..=1,
        default_value = "false", default_missing_value = "true", value_name = "BOOL")]
    pub refunds: bool,
    /// What a request gets when the store fails or does not answer within
    /// `TOLLGATE_STORE_TIMEOUT`: unset, the Go service's error (gRPC
    /// `UNKNOWN`; Envoy's `failure_mode_deny` decides); `fail_open` answers
    /// OK, `fail_closed` OVER_LIMIT, both counted. A tollgate extension.
    #[arg(long, env = "TOLLGATE_STORE_FAILURE", value_parser = failure_policy,
        value_name = "fail_open|fail_closed")]
    pub store_failure: Option<tollgate_core::FailurePolicy>,
    /// The longest a decision waits for the store (Redis): a call slower than
    /// this fails (see `TOLLGATE_STORE_FAILURE`). It caps `REDIS_TIMEOUT`,
    /// which bounds connecting too. A tollgate extension.
    #[arg(long, env = "TOLLGATE_STORE_TIMEOUT", value_parser = go_duration, default_value = "50ms",
        value_name = "DURATION")]
    pub store_timeout: Duration,
    /// Threads serving the gRPC listener, each a single-threaded event loop
    /// of its own, each new connection going to the one with the fewest open
    /// (default: the number of CPUs
    /// the process may use). A tollgate extension: the Go service's runtime
    /// uses `GOMAXPROCS`.
    #[arg(long, env = "TOLLGATE_WORKERS", value_name = "COUNT",
        value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=MAX_WORKERS as u64))]
    pub workers: Option<usize>,
    /// How long a connection to any listener (gRPC, HTTP, debug,
    /// Prometheus) may move no byte with no call in flight before it is
    /// closed, in every phase: before its first byte, between calls, an
    /// HTTP/2 connection that sends none. More than 0. A tollgate extension: the Go
    /// service never closes an idle connection (only at
    /// `GRPC_MAX_CONNECTION_AGE`), so a client that opens connections and
    /// sends nothing could use up its file descriptors.
    #[arg(long, env = "TOLLGATE_IDLE_TIMEOUT", value_parser = positive_go_duration, default_value = "30s",
        value_name = "DURATION")]
    pub idle_timeout: Duration,

    /// Report unhealthy (`/healthcheck` 500, gRPC health `NOT_SERVING`)
    /// until a configuration of at least one domain is loaded, and again
    /// whenever the one in force has none, as the Go service does.
    #[arg(long, env = "HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED", value_parser = go_bool,
        num_args = 0..=1, default_value = "false", default_missing_value = "true",
        value_name = "BOOL")]
    pub healthy_with_at_least_one_config_loaded: bool,

    /// Send no stats anywhere.
    #[arg(long, env = "DISABLE_STATS", value_parser = go_bool, num_args = 0..=1,
        default_value = "false", default_missing_value = "true", value_name = "BOOL")]
    pub disable_stats: bool,
    /// Send counters to a statsd over TCP (Go's default: on, to localhost:8125).
    #[arg(long, env = "USE_STATSD", value_parser = go_bool, num_args = 0..=1,
        default_value = "true", default_missing_value = "true", value_name = "BOOL")]
    pub use_statsd: bool,
    /// The statsd host.
    #[arg(
        long,
        env = "STATSD_HOST",
        default_value = "localhost",
        value_name = "HOST"
    )]
    pub statsd_host: String,
    /// The statsd port.
    #[arg(long, env = "STATSD_PORT", default_value_t = 8125, value_name = "PORT")]
    pub statsd_port: u16,
    /// How often counters are sent to statsd.
    #[arg(long, env = "STATS_FLUSH_INTERVAL", value_parser = go_duration, default_value = "10s",
        value_name = "DURATION")]
    pub stats_flush_interval: Duration,
    /// Serve the counters in Prometheus's text format (needs `USE_STATSD=false`,
    /// as in the Go service).
    #[arg(long, env = "USE_PROMETHEUS", value_parser = go_bool, num_args = 0..=1,
        default_value = "false", default_missing_value = "true", value_name = "BOOL")]
    pub use_prometheus: bool,
    /// Address of the Prometheus listener (`:9090` is every address).
    #[arg(
        long,
        env = "PROMETHEUS_ADDR",
        default_value = ":9090",
        value_name = "ADDR"
    )]
    pub prometheus_addr: String,
    /// Path of the Prometheus page.
    #[arg(
        long,
        env = "PROMETHEUS_PATH",
        default_value = "/metrics",
        value_name = "PATH"
    )]
    pub prometheus_path: String,

    /// Log level: `trace`, `debug`, `info` (the default: the start lines;
    /// the Go service's default is `warn`, at which it writes its own start
    /// lines), `warn`, `error`, `fatal`, `panic` (any case). `RUST_LOG`,
    /// when set, wins.
    #[arg(long, env = "LOG_LEVEL", default_value = "INFO", value_name = "LEVEL")]
    pub log_level: String,
    /// Log format: `json` (any case) for one JSON object per line, anything
    /// else for text.
    #[arg(
        long,
        env = "LOG_FORMAT",
        default_value = "text",
        value_name = "FORMAT"
    )]
    pub log_format: String,
}

/// Parses `RlsArguments` alone, for [`RlsArguments::defaults`].
#[derive(Parser)]
struct Standalone {
    #[command(flatten)]
    arguments: RlsArguments,
}

impl RlsArguments {
    /// The Go service's defaults, whatever the environment says (for tests
    /// and embedding: no environment variable is read).
    pub fn defaults() -> RlsArguments {
        let command = Standalone::command().mut_args(|argument| argument.env(None));
        let matches = command.get_matches_from(["tollgate-rls"]);
        match Standalone::from_arg_matches(&matches) {
            Ok(standalone) => standalone.arguments,
            // The defaults are constants that parse; no input reaches here.
            Err(error) => error.exit(),
        }
    }

    /// The settings of the environment variables alone, with flags from
    /// `arguments` (the program name first, as `std::env::args`).
    ///
    /// # Errors
    ///
    /// clap's error for a value that does not parse.
    pub fn try_parse_from<I, T>(arguments: I) -> Result<RlsArguments, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        Standalone::try_parse_from(arguments).map(|standalone| standalone.arguments)
    }

    /// The gRPC worker threads: `TOLLGATE_WORKERS`; else tokio's
    /// `TOKIO_WORKER_THREADS`, which set them before the workers had a
    /// setting of their own, when it is a count from 1 to 1024;
    /// else the CPUs the process may use (1 when the system cannot tell).
    pub fn worker_count(&self) -> usize {
        tollgate_serve::worker_count(worker_setting(
            self.workers,
            std::env::var("TOKIO_WORKER_THREADS").ok().as_deref(),
        ))
    }

    /// Checks what no flag's parser can: the combinations the Go service
    /// refuses at start.
    ///
    /// # Errors
    ///
    /// [`SettingsError::StatsSinks`] for more than one stats sink,
    /// [`SettingsError::NearLimitRatio`] for a ratio that is not a number.
    pub fn check(&self) -> Result<(), SettingsError> {
        if !self.disable_stats && self.use_statsd && self.use_prometheus {
            return Err(SettingsError::StatsSinks);
        }
        if !self.near_limit_ratio.is_finite() {
            return Err(SettingsError::NearLimitRatio(self.near_limit_ratio));
        }
        Ok(())
    }
}

/// The worker setting [`RlsArguments::worker_count`] gives
/// `tollgate_serve::worker_count`: `TOLLGATE_WORKERS`, else
/// `TOKIO_WORKER_THREADS`'s text when it is a count from 1 to 1024, else none
/// (the CPUs).
fn worker_setting(setting: Option<usize>, tokio_threads: Option<&str>) -> Option<usize> {
    setting.or_else(|| {
        tokio_threads
            .and_then(|count| count.parse::<usize>().ok())
            .filter(|count| (1..=MAX_WORKERS).contains(count))
    })
}

/// Go's `strconv.ParseBool`: `1 t T TRUE true True` and `0 f F FALSE false False`.
///
/// # Errors
///
/// A message naming the value for anything else (the Go service does not start
/// then either).
pub fn go_bool(value: &str) -> Result<bool, String> {
    match value {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Ok(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Ok(false),
        _ => Err(format!("'{value}' is not a boolean (true or false)")),
    }
}

/// `fail_open` or `fail_closed`.
///
/// # Errors
///
/// A message naming the value for anything else.
pub(crate) fn failure_policy(value: &str) -> Result<tollgate_core::FailurePolicy, String> {
    match value {
        "fail_open" => Ok(tollgate_core::FailurePolicy::FailOpen),
        "fail_closed" => Ok(tollgate_core::FailurePolicy::FailClosed),
        _ => Err(format!("'{value}' is not fail_open or fail_closed")),
    }
}

/// [`go_duration`], more than 0 (an idle timeout of 0 would close every
/// connection before its first request).
pub fn positive_go_duration(value: &str) -> Result<Duration, String> {
    match go_duration(value)? {
        Duration::ZERO => Err(format!("'{value}' is 0: give a duration more than 0")),
        duration => Ok(duration),
    }
}

/// Go's `time.ParseDuration` for non-negative durations: decimal numbers each
/// followed by a unit (`ns`, `us`, `µs`, `ms`, `s`, `m`, `h`), `0` alone.
pub fn go_duration(value: &str) -> Result<Duration, String> {
    let invalid = || format!("'{value}' is not a duration (such as 10s, 1m30s, 250ms)");
    if value == "0" {
        return Ok(Duration::ZERO);
    }
    let mut rest = value.strip_prefix('+').unwrap_or(value);
    if rest.is_empty() {
        return Err(invalid());
    }
    let mut total = 0f64;
    while !rest.is_empty() {
        let number_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(invalid)?;
        let number: f64 = rest[..number_end].parse().map_err(|_| invalid())?;
        rest = &rest[number_end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let seconds = match &rest[..unit_end] {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return Err(invalid()),
        };
        total += number * seconds;
        rest = &rest[unit_end..];
    }
    Duration::try_from_secs_f64(total).map_err(|_| invalid())
}

#[cfg(test)]
#[path = "arguments_tests.rs"]
mod tests;
