//! The settings that only a restart changes, listed once: a running gateway
//! keeps their start values, and a reload that changes one says so by name (a
//! reload that silently kept an old admin token would let an operator believe
//! a leaked one was revoked).

use super::ServeConfig;
use super::listeners::worker_count;

/// A configuration as it is in force: the file's settings, with the admin
/// token and the worker count resolved. No `Debug`: it holds the token.
#[derive(Clone)]
pub(crate) struct InForce {
    /// The configuration, with `store.url` the URL in force (the command
    /// line's when given).
    pub(crate) config: ServeConfig,
    /// The admin token (from the environment or the file).
    pub(crate) admin_token: Option<String>,
    /// The worker threads.
    pub(crate) workers: usize,
}

impl InForce {
    /// `config` with its admin token and worker count resolved now.
    pub(crate) fn new(config: ServeConfig) -> Self {
        InForce {
            admin_token: config.admin.token_in_force(),
            workers: worker_count(config.workers),
            config,
        }
    }
}

/// One setting only a restart changes.
struct StartOnly {
    /// Its name, as the file writes it.
    name: &'static str,
    /// Whether it is start-only only with the Redis store (`false`: always).
    redis_only: bool,
    /// Whether it differs between the two configurations.
    differs: fn(&InForce, &InForce) -> bool,
}

/// Every setting a reload cannot change.
const START_ONLY: [StartOnly; 16] = [
    StartOnly {
        name: "listen",
        redis_only: false,
        differs: |a, b| a.config.listen != b.config.listen,
    },
    StartOnly {
        name: "workers",
        redis_only: false,
        differs: |a, b| a.workers != b.workers,
    },
    StartOnly {
        name: "admin.listen",
        redis_only: false,
        differs: |a, b| a.config.admin.listen != b.config.admin.listen,
    },
    StartOnly {
        name: "admin.token (or its environment variable)",
        redis_only: false,
        differs: |a, b| a.admin_token != b.admin_token,
    },
    // The listener is HTTPS or plain from the start; the certificate files
    // of an HTTPS one are read again on every reload.
    StartOnly {
        name: "tls (HTTPS or plain HTTP on listen)",
        redis_only: false,
        differs: |a, b| a.config.tls.is_some() != b.config.tls.is_some(),
    },
    StartOnly {
        name: "upstream.connect_timeout",
        redis_only: false,
        differs: |a, b| a.config.upstream.connect_timeout != b.config.upstream.connect_timeout,
    },
    StartOnly {
        name: "store.url",
        redis_only: false,
        differs: |a, b| a.config.store.url != b.config.store.url,
    },
    StartOnly {
        name: "store.ca_file",
        redis_only: true,
        differs: |a, b| a.config.store.ca_file != b.config.store.ca_file,
    },
    StartOnly {
        name: "store.prefix",
        redis_only: true,
        differs: |a, b| a.config.store.prefix != b.config.store.prefix,
    },
    StartOnly {
        name: "store.timeout",
        redis_only: true,
        differs: |a, b| a.config.store.timeout != b.config.store.timeout,
    },
    StartOnly {
        name: "store.lease_ttl",
        redis_only: true,
        differs: |a, b| a.config.store.lease_ttl != b.config.store.lease_ttl,
    },
    StartOnly {
        name: "store.key_secret_env (or the secret it names)",
        redis_only: true,
        differs: |a, b| {
            a.config.store.key_secret_env != b.config.store.key_secret_env
                || a.config.store.key_secret() != b.config.store.key_secret()
        },
    },
    StartOnly {
        name: "store.time",
        redis_only: true,
        differs: |a, b| a.config.store.time != b.config.store.time,
    },
    StartOnly {
        name: "admin.top_keys",
        redis_only: false,
        differs: |a, b| a.config.admin.top_keys != b.config.admin.top_keys,
    },
    // The writer is opened at start (a reload reopens its file, the same).
    StartOnly {
        name: "access_log",
        redis_only: false,
        differs: |a, b| a.config.access_log != b.config.access_log,
    },
    // With the Redis store, the default policy in Redis rules (changed
    // through the admin API), not the file's.
    StartOnly {
        name: "limits.default_policy (with Redis, set it through PUT /admin/policy)",
        redis_only: true,
        differs: |a, b| a.config.limits.default_policy != b.config.limits.default_policy,
    },
];

/// The names of the settings `reloaded` changes that keep their `started`
/// values until a restart, in the order of [`START_ONLY`].
pub(crate) fn kept_until_restart(started: &InForce, reloaded: &InForce) -> Vec<&'static str> {
    let on_redis = started.config.store.url.is_some();
    START_ONLY
        .iter()
        .filter(|setting| on_redis || !setting.redis_only)
        .filter(|setting| (setting.differs)(started, reloaded))
        .map(|setting| setting.name)
        .collect()
}

/// The tiers of `before` that `reloaded` no longer configures. Keys assigned
/// to one keep the assignment (the engine never discards it) and are held to
/// the default policy until assigned another tier.
pub(crate) fn removed_tiers<'a>(before: &'a ServeConfig, reloaded: &ServeConfig) -> Vec<&'a str> {
    before
        .limits
        .tiers
        .keys()
        .filter(|tier| !reloaded.limits.tiers.contains_key(tier.as_str()))
        .map(String::as_str)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(toml: &str) -> ServeConfig {
        ServeConfig::from_toml_str(toml).unwrap()
    }

    fn in_force(toml: &str, admin_token: Option<&str>) -> InForce {
        let config = config(toml);
        InForce {
            workers: worker_count(config.workers),
            config,
            admin_token: admin_token.map(str::to_owned),
        }
    }

    #[test]
    fn a_reload_names_every_setting_it_cannot_change() {
        let started_toml = "listen = \"127.0.0.1:8080\"\nworkers = 1\n[admin]\ntoken = \"old\"\n\
             [store]\nurl = \"redis://127.0.0.1:6379\"\n";
        let started = in_force(started_toml, Some("old"));
        assert!(kept_until_restart(&started, &in_force(started_toml, Some("old"))).is_empty());
        let changed = in_force(
            "listen = \"127.0.0.1:8085\"\nworkers = 3\n\
             [admin]\nlisten = \"127.0.0.1:9091\"\ntoken = \"new\"\n\
             [upstream]\nconnect_timeout = \"1s\"\ntimeout = \"1s\"\n\
             [store]\nurl = \"redis://127.0.0.1:6380\"\nprefix = \"other\"\n\
             timeout = \"1s\"\ntime = \"local\"\nfailure = \"fail_closed\"\n",
            Some("new"),
        );
        assert_eq!(
            kept_until_restart(&started, &changed),
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
        let memory = in_force(
            "[limits.default_policy]\nalgorithm = \"fixed_window\"\nlimit = 5\nwindow_s = 60\n",
            None,
        );
        let other_policy = in_force(
            "[limits.default_policy]\nalgorithm = \"fixed_window\"\nlimit = 9\nwindow_s = 60\n\
             [store]\nprefix = \"other\"\n",
            None,
        );
        assert!(kept_until_restart(&memory, &other_policy).is_empty());
        // With Redis, the default policy is Redis's.
        let mut redis_policy = in_force(
            "listen = \"127.0.0.1:8080\"\nworkers = 1\n[admin]\ntoken = \"old\"\n\
             [limits.default_policy]\nalgorithm = \"fixed_window\"\nlimit = 9\nwindow_s = 60\n",
            Some("old"),
        );
        // The URL in force comes from the command line, not the file.
        redis_policy.config.store.url = Some("redis://127.0.0.1:6379".to_owned());
        assert_eq!(
            kept_until_restart(&started, &redis_policy),
            ["limits.default_policy (with Redis, set it through PUT /admin/policy)"]
        );
        // A file that drops the Redis URL cannot move the limits back in memory.
        let dropped = in_force(
            "listen = \"127.0.0.1:8080\"\nworkers = 1\n[admin]\ntoken = \"old\"\n",
            Some("old"),
        );
        assert_eq!(kept_until_restart(&started, &dropped), ["store.url"]);
    }

    #[test]
    fn tiers_a_reload_drops_are_named() {
        let tier = |name: &str| {
            format!(
                "[limits.tiers.{name}]\nalgorithm = \"fixed_window\"\nlimit = 1\nwindow_s = 60\n"
            )
        };
        let before = config(&(tier("gold") + &tier("silver") + &tier("bronze")));
        let reloaded = config(&(tier("silver") + &tier("platinum")));
        // In the file's order of tiers (a sorted map): bronze before gold.
        assert_eq!(removed_tiers(&before, &reloaded), ["bronze", "gold"]);
        assert!(removed_tiers(&before, &before.clone()).is_empty());
    }
}
