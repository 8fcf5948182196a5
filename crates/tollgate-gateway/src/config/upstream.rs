//! `[upstream]`: timeouts of the connections to upstreams, and how long a
//! server that cannot be connected to is skipped.

use std::time::Duration;

use serde::Deserialize;

use super::format::duration;

/// Upstream connections.
#[derive(Clone, Copy, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpstreamConfig {
    /// How long to wait for an upstream's response headers before answering
    /// 504. Default `"30s"`.
    #[serde(default = "default_timeout", deserialize_with = "duration")]
    pub timeout: Duration,
    /// How long to wait for a connection before answering 502. Default `"5s"`.
    #[serde(default = "default_connect_timeout", deserialize_with = "duration")]
    pub connect_timeout: Duration,
    /// How long an upstream may pause in the middle of a response body before
    /// the response is cut off (the client's connection closed before the
    /// body's end). Default `"60s"`, as nginx's `proxy_read_timeout`.
    #[serde(default = "default_body_idle_timeout", deserialize_with = "duration")]
    pub body_idle_timeout: Duration,
    /// How long a server of a route with several (`upstreams`) is skipped
    /// after it refused a connection or did not accept one within
    /// `connect_timeout`; `0s` never skips. Default `"10s"`, as nginx's
    /// `fail_timeout`.
    #[serde(default = "default_backoff", deserialize_with = "duration")]
    pub backoff: Duration,
}

impl Default for UpstreamConfig {
    fn default() -> Self {
        UpstreamConfig {
            timeout: default_timeout(),
            connect_timeout: default_connect_timeout(),
            body_idle_timeout: default_body_idle_timeout(),
            backoff: default_backoff(),
        }
    }
}

fn default_timeout() -> Duration {
    Duration::from_secs(30)
}

fn default_connect_timeout() -> Duration {
    Duration::from_secs(5)
}

fn default_body_idle_timeout() -> Duration {
    Duration::from_secs(60)
}

fn default_backoff() -> Duration {
    Duration::from_secs(10)
}
