//! The settings a running gateway cannot change: noted at start, and compared
//! with a reloaded configuration so that the reload can say which of its
//! changes wait for a restart (a reload that silently kept an old admin token
//! would let an operator believe a leaked one was revoked).

use std::net::SocketAddr;
use std::time::Duration;

use super::config::{ServeConfig, StoreTime};

/// The settings read once, at start.
#[derive(Debug)]
pub(crate) struct StartSettings {
    listen: SocketAddr,
    workers: Option<usize>,
    admin_listen: SocketAddr,
    /// The admin token in force (from the environment or the file).
    admin_token: Option<String>,
    connect_timeout: Duration,
    store_url: Option<String>,
    store_prefix: String,
    store_timeout: Duration,
    store_time: StoreTime,
}

impl StartSettings {
    /// The settings of `config` as started, with the admin token in force.
    pub(crate) fn new(config: &ServeConfig, admin_token: Option<String>) -> Self {
        StartSettings {
            listen: config.listen,
            workers: config.workers,
            admin_listen: config.admin.listen,
            admin_token,
            connect_timeout: config.upstream.connect_timeout,
            store_url: config.store.url.clone(),
            store_prefix: config.store.prefix.clone(),
            store_timeout: config.store.timeout,
            store_time: config.store.time,
        }
    }

    /// The names of the settings `reloaded` changes that keep their start
    /// values until a restart. `admin_token` is the token `reloaded` would put
    /// in force. A file without `[store] url` changes no store setting: the
    /// store may have come from the command line.
    pub(crate) fn kept_until_restart(
        &self,
        reloaded: &ServeConfig,
        admin_token: Option<&str>,
    ) -> Vec<&'static str> {
        let mut kept = Vec::new();
        let mut compare = |changed: bool, name| {
            if changed {
                kept.push(name);
            }
        };
        compare(reloaded.listen != self.listen, "listen");
        compare(reloaded.workers != self.workers, "workers");
        compare(reloaded.admin.listen != self.admin_listen, "admin.listen");
        compare(
            admin_token != self.admin_token.as_deref(),
            "admin.token (or its environment variable)",
        );
        compare(
            reloaded.upstream.connect_timeout != self.connect_timeout,
            "upstream.connect_timeout",
        );
        if reloaded.store.url.is_some() {
            compare(reloaded.store.url != self.store_url, "store.url");
            compare(reloaded.store.prefix != self.store_prefix, "store.prefix");
            compare(
                reloaded.store.timeout != self.store_timeout,
                "store.timeout",
            );
            compare(reloaded.store.time != self.store_time, "store.time");
        }
        kept
    }
}

/// The admin token `config` puts in force: the environment variable it names
/// when set and not empty, else its `admin.token`.
pub(crate) fn admin_token(config: &ServeConfig) -> Option<String> {
    std::env::var(&config.admin.token_env)
        .ok()
        .filter(|token| !token.is_empty())
        .or_else(|| config.admin.token.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(toml: &str) -> ServeConfig {
        ServeConfig::from_toml_str(toml).unwrap()
    }

    #[test]
    fn a_reload_names_every_setting_it_cannot_change() {
        let started = config(
            "listen = \"127.0.0.1:8080\"\n[admin]\ntoken = \"old\"\n\
             [store]\nurl = \"redis://127.0.0.1:6379\"\n",
        );
        let start = StartSettings::new(&started, Some("old".to_owned()));
        assert!(start.kept_until_restart(&started, Some("old")).is_empty());
        let changed = config(
            "listen = \"127.0.0.1:8085\"\nworkers = 3\n\
             [admin]\nlisten = \"127.0.0.1:9091\"\ntoken = \"new\"\n\
             [upstream]\nconnect_timeout = \"1s\"\ntimeout = \"1s\"\n\
             [store]\nurl = \"redis://127.0.0.1:6380\"\nprefix = \"other\"\n\
             timeout = \"1s\"\ntime = \"local\"\nfailure = \"fail_closed\"\n",
        );
        assert_eq!(
            start.kept_until_restart(&changed, Some("new")),
            [
                "listen",
                "workers",
                "admin.listen",
                "admin.token (or its environment variable)",
                "upstream.connect_timeout",
                "store.url",
                "store.prefix",
                "store.timeout",
                "store.time",
            ]
        );
        // No [store] url in the file: the store (perhaps from --store) stays,
        // and nothing about it is reported.
        let without_store = config("listen = \"127.0.0.1:8080\"\n[admin]\ntoken = \"old\"\n");
        assert!(
            start
                .kept_until_restart(&without_store, Some("old"))
                .is_empty()
        );
    }
}
