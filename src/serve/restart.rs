//! The settings a running gateway cannot change: noted at start, and compared
//! with a reloaded configuration so that the reload can say which of its
//! changes wait for a restart (a reload that silently kept an old admin token
//! would let an operator believe a leaked one was revoked).

use std::net::SocketAddr;
use std::time::Duration;

use tollgate_core::Policy;

use super::config::{ServeConfig, StoreTime};
use super::worker_count;

/// The settings read once, at start. No `Debug`: it holds the admin token.
pub(crate) struct StartSettings {
    listen: SocketAddr,
    /// The worker threads started.
    workers: usize,
    admin_listen: SocketAddr,
    /// The admin token in force (from the environment or the file).
    admin_token: Option<String>,
    connect_timeout: Duration,
    store_url: Option<String>,
    store_prefix: String,
    store_timeout: Duration,
    store_time: StoreTime,
    /// Whether the store running is the in-memory one.
    in_memory_store: bool,
    /// The file's default policy: with the Redis store, the one in Redis
    /// rules (changed through the admin API), not the file's.
    default_policy: Policy,
}

impl StartSettings {
    /// The settings of `config` as started, with the admin token in force;
    /// `in_memory_store`: whether the store started is the in-memory one.
    pub(crate) fn new(
        config: &ServeConfig,
        admin_token: Option<String>,
        in_memory_store: bool,
    ) -> Self {
        StartSettings {
            listen: config.listen,
            workers: worker_count(config.workers),
            admin_listen: config.admin.listen,
            admin_token,
            connect_timeout: config.upstream.connect_timeout,
            store_url: config.store.url.clone(),
            store_prefix: config.store.prefix.clone(),
            store_timeout: config.store.timeout,
            store_time: config.store.time,
            in_memory_store,
            default_policy: config.limits.default_policy,
        }
    }

    /// Whether the gateway started with the in-memory store (no store URL),
    /// which a reload cannot change.
    pub(crate) fn in_memory_store(&self) -> bool {
        self.in_memory_store
    }

    /// The names of the settings `reloaded` changes that keep their start
    /// values until a restart. `admin_token` is the token `reloaded` would put
    /// in force; `reloaded.store.url` is the URL in force (the command line's
    /// when given).
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
        compare(worker_count(reloaded.workers) != self.workers, "workers");
        compare(reloaded.admin.listen != self.admin_listen, "admin.listen");
        compare(
            admin_token != self.admin_token.as_deref(),
            "admin.token (or its environment variable)",
        );
        compare(
            reloaded.upstream.connect_timeout != self.connect_timeout,
            "upstream.connect_timeout",
        );
        compare(reloaded.store.url != self.store_url, "store.url");
        if self.store_url.is_some() {
            compare(reloaded.store.prefix != self.store_prefix, "store.prefix");
            compare(
                reloaded.store.timeout != self.store_timeout,
                "store.timeout",
            );
            compare(reloaded.store.time != self.store_time, "store.time");
            compare(
                reloaded.limits.default_policy != self.default_policy,
                "limits.default_policy (with Redis, set it through PUT /admin/policy)",
            );
        }
        kept
    }
}

/// The tiers of `before` that `reloaded` no longer configures. Keys assigned
/// to one keep the assignment (the engine never discards it) and are held to
/// the default policy until assigned another tier.
pub(crate) fn removed_tiers<'a>(before: &'a [String], reloaded: &ServeConfig) -> Vec<&'a str> {
    before
        .iter()
        .filter(|tier| !reloaded.limits.tiers.contains_key(tier.as_str()))
        .map(String::as_str)
        .collect()
}

/// The admin token of `examples/gateway.toml`, known to everyone: a gateway
/// started with it warns.
pub(crate) const EXAMPLE_ADMIN_TOKEN: &str = "change-me";

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
            "listen = \"127.0.0.1:8080\"\nworkers = 1\n[admin]\ntoken = \"old\"\n\
             [store]\nurl = \"redis://127.0.0.1:6379\"\n",
        );
        let start = StartSettings::new(&started, Some("old".to_owned()), false);
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
        // The in-memory store: a file that names no Redis changes nothing
        // about the store, and its default policy applies at once.
        let memory = config(
            "[limits.default_policy]\nalgorithm = \"fixed_window\"\nlimit = 5\nwindow_s = 60\n",
        );
        let start = StartSettings::new(&memory, None, true);
        let other_policy = config(
            "[limits.default_policy]\nalgorithm = \"fixed_window\"\nlimit = 9\nwindow_s = 60\n\
             [store]\nprefix = \"other\"\n",
        );
        assert!(start.kept_until_restart(&other_policy, None).is_empty());
        // With Redis, the default policy is Redis's.
        let start = StartSettings::new(&started, Some("old".to_owned()), false);
        let mut redis_policy = config(
            "listen = \"127.0.0.1:8080\"\nworkers = 1\n[admin]\ntoken = \"old\"\n\
             [limits.default_policy]\nalgorithm = \"fixed_window\"\nlimit = 9\nwindow_s = 60\n",
        );
        // The URL in force comes from the command line, not the file.
        redis_policy.store.url = Some("redis://127.0.0.1:6379".to_owned());
        assert_eq!(
            start.kept_until_restart(&redis_policy, Some("old")),
            ["limits.default_policy (with Redis, set it through PUT /admin/policy)"]
        );
        // A file that drops the Redis URL cannot move the limits back in memory.
        let dropped =
            config("listen = \"127.0.0.1:8080\"\nworkers = 1\n[admin]\ntoken = \"old\"\n");
        assert_eq!(
            start.kept_until_restart(&dropped, Some("old")),
            ["store.url"]
        );
    }

    #[test]
    fn tiers_a_reload_drops_are_named() {
        let tier = |name: &str| {
            format!(
                "[limits.tiers.{name}]\nalgorithm = \"fixed_window\"\nlimit = 1\nwindow_s = 60\n"
            )
        };
        let before = ["gold".to_owned(), "silver".to_owned(), "bronze".to_owned()];
        let reloaded = config(&(tier("silver") + &tier("platinum")));
        assert_eq!(removed_tiers(&before, &reloaded), ["gold", "bronze"]);
        assert!(
            removed_tiers(
                &before,
                &config(&(tier("gold") + &tier("silver") + &tier("bronze")))
            )
            .is_empty()
        );
    }
}
