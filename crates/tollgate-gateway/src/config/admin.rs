//! `[admin]`: the admin and operations listener, and the admin API's bearer
//! token.

use std::net::SocketAddr;

use serde::Deserialize;

/// The admin token of `examples/gateway.toml`, known to everyone: a gateway
/// started with it warns.
pub(crate) const EXAMPLE_ADMIN_TOKEN: &str = "change-me";

/// The admin API and operations endpoints.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdminConfig {
    /// Where the admin API, `/metrics`, `/healthz` and `/readyz` listen.
    /// Default `127.0.0.1:8081`.
    #[serde(default = "default_admin_listen")]
    pub listen: SocketAddr,
    /// The bearer token of the admin API. The environment variable named by
    /// `token_env` overrides it when set. With neither, every admin call is
    /// refused.
    #[serde(default)]
    pub token: Option<String>,
    /// The environment variable holding the token. Default `TOLLGATE_ADMIN_TOKEN`.
    #[serde(default = "default_token_env")]
    pub token_env: String,
    /// Whether to count the keys most active and most refused for
    /// `GET /admin/top` (a sketch per worker thread). Default true.
    #[serde(default = "default_top_keys")]
    pub top_keys: bool,
}

impl AdminConfig {
    /// The admin token in force: the environment variable `token_env` names
    /// when set and not empty, else `token` when not empty. An empty token
    /// is none: every admin call is refused, and the start warns.
    pub(crate) fn token_in_force(&self) -> Option<String> {
        std::env::var(&self.token_env)
            .ok()
            .filter(|token| !token.is_empty())
            .or_else(|| self.token.clone().filter(|token| !token.is_empty()))
    }
}

impl Default for AdminConfig {
    fn default() -> Self {
        AdminConfig {
            listen: default_admin_listen(),
            token: None,
            token_env: default_token_env(),
            top_keys: default_top_keys(),
        }
    }
}

fn default_admin_listen() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 8081))
}

fn default_top_keys() -> bool {
    true
}

fn default_token_env() -> String {
    "TOLLGATE_ADMIN_TOKEN".to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_token_is_no_token() {
        let admin = |token: &str| AdminConfig {
            token: Some(token.to_owned()),
            // A variable no test environment sets.
            token_env: "TOLLGATE_TEST_UNSET_ADMIN_TOKEN".to_owned(),
            ..AdminConfig::default()
        };
        assert_eq!(admin("").token_in_force(), None);
        assert_eq!(admin("s3cret").token_in_force().as_deref(), Some("s3cret"));
        let config = super::super::ServeConfig::from_toml_str("[admin]\ntoken = \"\"").unwrap();
        assert_eq!(
            config.admin_token_warning(config.admin.token_in_force().as_deref()),
            Some(
                "no admin token (admin.token or $TOLLGATE_ADMIN_TOKEN): every admin call will be \
                 refused"
                    .to_owned()
            )
        );
    }
}
