//! The decision endpoint in force (`[forward_auth]`), as the reloadable
//! snapshot holds it: its path, its refusal status and the header naming the
//! original URI. How it decides is `forward_auth.rs`.

use http::StatusCode;
use http::header::HeaderName;

use crate::config::ForwardAuthConfig;

/// The decision endpoint in force.
#[derive(Clone, Debug)]
pub(crate) struct ForwardAuth {
    /// The path it answers at.
    pub(crate) path: String,
    /// The status of a refusal.
    pub(crate) refused_status: StatusCode,
    /// The header the original URI is read from.
    pub(crate) uri_header: HeaderName,
}

impl ForwardAuth {
    /// The endpoint `config` describes; `None` when it is off.
    pub(crate) fn from_config(config: &ForwardAuthConfig) -> Option<ForwardAuth> {
        Some(ForwardAuth {
            path: config.path.clone()?,
            refused_status: StatusCode::from_u16(config.refused_status)
                .unwrap_or(StatusCode::TOO_MANY_REQUESTS),
            // Checked at load; the default should it not parse.
            uri_header: HeaderName::from_bytes(config.uri_header.as_bytes())
                .unwrap_or(HeaderName::from_static("x-forwarded-uri")),
        })
    }
}
