//! The access-log formats `tollgate replay` reads ([`Format`]): tollgate's
//! own (JSON or text, told apart line by line), nginx's `combined`, and
//! Envoy's JSON access log.

mod envoy;
mod nginx;
mod tollgate;

pub use nginx::NginxKey;

use crate::line::LogLine;

/// How a log's lines are read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Format {
    /// tollgate's access log, JSON or text (docs/CONFIG.md): its `key` is a
    /// fingerprint, its `route`, `tier` and `decision` are read too.
    Tollgate,
    /// nginx's `combined` format, the key from the field `NginxKey` names.
    Nginx(NginxKey),
    /// Envoy's JSON access log (a `json_format`): `start_time`, `path` (or
    /// `:path`, `x-envoy-original-path`), `downstream_remote_address`, and
    /// the key from the field named here (a header's value, such as
    /// `%REQ(X-API-KEY)%`; `Bearer X` gives `X`).
    Envoy {
        /// The field holding the key.
        key_field: String,
    },
}

impl Format {
    /// One line read; `Err` says why it is not one of this format.
    pub fn parse(&self, line: &str) -> Result<LogLine, String> {
        match self {
            Format::Tollgate => tollgate::parse(line),
            Format::Nginx(key) => nginx::parse(line, key),
            Format::Envoy { key_field } => envoy::parse(line, key_field),
        }
    }
}

/// An RFC 3339 time in nanoseconds since the epoch.
pub(crate) fn rfc3339(text: &str) -> Option<u64> {
    let time = humantime::parse_rfc3339_weak(text).ok()?;
    let since = time.duration_since(std::time::UNIX_EPOCH).ok()?;
    u64::try_from(since.as_nanos()).ok()
}
