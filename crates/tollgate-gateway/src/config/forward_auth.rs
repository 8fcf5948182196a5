//! `[forward_auth]`: the decision endpoint for proxies that ask an external
//! service before they forward a request (nginx `auth_request`, Caddy
//! `forward_auth`, Traefik ForwardAuth). Off unless `path` is set.

use serde::Deserialize;

use super::ServeConfigError;

/// The decision endpoint's settings (reloadable).
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ForwardAuthConfig {
    /// The path on the gateway listener that answers decisions instead of
    /// proxying, such as `"/_tollgate/decide"`; `None` (the default) turns
    /// the endpoint off. It must start with `/` and be in normal form (no
    /// `.` or `..` segments, no `//`); a route with the same prefix never
    /// sees requests for exactly this path.
    #[serde(default)]
    pub path: Option<String>,
    /// The status of a refusal: 429 (the default: Caddy and Traefik pass the
    /// answer to the client as it is), or 403 or 401 for nginx, whose
    /// `auth_request` accepts only 2xx, 401 and 403 (an `error_page` turns it
    /// back into 429 with `Retry-After`; see docs/CONFIG.md).
    #[serde(default = "default_refused_status")]
    pub refused_status: u16,
    /// The one header the original request's URI is read from:
    /// `"x-forwarded-uri"` (the default: what Caddy and Traefik set) or
    /// another the asking proxy sets itself, such as `"x-original-uri"` for
    /// nginx (`proxy_set_header X-Original-URI $request_uri`). No other header
    /// is read: a proxy that forwards the client's headers (Caddy, Traefik)
    /// would otherwise pass on a client's own claim of its URI.
    #[serde(default = "default_uri_header")]
    pub uri_header: String,
}

impl Default for ForwardAuthConfig {
    fn default() -> Self {
        ForwardAuthConfig {
            path: None,
            refused_status: default_refused_status(),
            uri_header: default_uri_header(),
        }
    }
}

fn default_uri_header() -> String {
    "x-forwarded-uri".to_owned()
}

fn default_refused_status() -> u16 {
    429
}

impl ForwardAuthConfig {
    pub(super) fn validate(&self) -> Result<(), ServeConfigError> {
        if !matches!(self.refused_status, 401 | 403 | 429) {
            return Err(ServeConfigError::Invalid(format!(
                "forward_auth.refused_status must be 429, 403 or 401, got {}",
                self.refused_status
            )));
        }
        if http::HeaderName::from_bytes(self.uri_header.as_bytes()).is_err() {
            return Err(ServeConfigError::Invalid(format!(
                "forward_auth.uri_header must be a header name, got {:?}",
                self.uri_header
            )));
        }
        if let Some(path) = &self.path {
            let normal = crate::request::path::normalize(path)
                .is_ok_and(|normal| matches!(normal, std::borrow::Cow::Borrowed(_)));
            if !path.starts_with('/') || !normal || path.contains('?') {
                return Err(ServeConfigError::Invalid(
                    "forward_auth.path must be a path in normal form starting with /, such as \
                     \"/_tollgate/decide\""
                        .to_owned(),
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(path: Option<&str>, refused_status: u16) -> Result<(), String> {
        ForwardAuthConfig {
            path: path.map(str::to_owned),
            refused_status,
            uri_header: default_uri_header(),
        }
        .validate()
        .map_err(|error| error.to_string())
    }

    #[test]
    fn only_a_normal_path_and_a_refusal_status_nginx_or_caddy_accept() {
        assert_eq!(check(None, 429), Ok(()));
        assert_eq!(check(Some("/_tollgate/decide"), 403), Ok(()));
        assert_eq!(check(Some("/auth"), 401), Ok(()));
        for bad in ["auth", "/a/../b", "//auth", "/auth?x=1", ""] {
            let error = check(Some(bad), 429).unwrap_err();
            assert!(
                error.contains("forward_auth.path must be a path"),
                "{bad}: {error}"
            );
        }
        // The file's section is checked on load.
        let error = crate::ServeConfig::from_toml_str("[forward_auth]\nrefused_status = 500\n")
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("forward_auth.refused_status must be 429, 403 or 401, got 500"),
            "{error}"
        );
        let error = crate::ServeConfig::from_toml_str("[forward_auth]\nuri_header = \"a b\"\n")
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("forward_auth.uri_header must be a header name"),
            "{error}"
        );
        let off = crate::ServeConfig::from_toml_str("").unwrap();
        assert_eq!(off.forward_auth, ForwardAuthConfig::default());
        for status in [200, 500, 430] {
            assert_eq!(
                check(None, status).unwrap_err(),
                format!("forward_auth.refused_status must be 429, 403 or 401, got {status}")
            );
        }
    }
}
