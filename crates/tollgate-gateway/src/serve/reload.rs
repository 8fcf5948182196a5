//! A configuration reload (SIGHUP, or [`Running::reload`](crate::Running)):
//! the access log's file reopened, the file read again (and the listener's
//! certificate files, with `[tls]`), everything built and validated before anything is
//! swapped, then the warnings a reload owes (changed settings that wait for a
//! restart, tiers no longer configured).

use std::sync::Arc;

use crate::app::App;
use crate::config::{
    InForce, ServeConfig, ServeConfigError, kept_until_restart, load_known_keys, removed_tiers,
};
use crate::serve::reloadable::Reloadable;
use crate::serve::tls::ListenerTls;

impl App {
    /// Reads the configuration file again and puts it in force; an invalid
    /// file changes nothing.
    pub(crate) fn reload(&self) -> Result<(), ServeConfigError> {
        // SIGHUP is also logrotate's signal: the access log's file is
        // reopened whatever becomes of the configuration.
        if let Some(access_log) = &self.access_log {
            access_log.reopen();
        }
        let Some(path) = &self.config_path else {
            return Err(ServeConfigError::Invalid(
                "no configuration file to reload: started on the built-in defaults".into(),
            ));
        };
        let mut config = ServeConfig::from_file(path)?;
        config.override_store_url(self.store_url.as_deref());
        let in_file = |error| ServeConfigError::File {
            path: path.display().to_string(),
            reason: Box::new(error),
        };
        // The listener's certificate files, read again (a bad one rejects
        // the reload: the certificate in force stays).
        let certificate = match (&self.listener_tls, &config.tls) {
            (Some(tls), Some(files)) => Some((tls, ListenerTls::load(files).map_err(in_file)?)),
            _ => None,
        };
        self.apply(&config).map_err(in_file)?;
        if let Some((tls, certificate)) = certificate {
            tls.put_in_force(certificate);
        }
        let reloaded = InForce::new(config);
        for warning in reloaded.config.warnings() {
            tracing::warn!("{warning}");
        }
        let before = self.in_force.swap(Arc::new(reloaded));
        let reloaded = self.in_force.load();
        for tier in removed_tiers(&before.config, &reloaded.config) {
            tracing::warn!(
                tier,
                "this tier is no longer configured: keys assigned to it are held to the \
                 default policy until assigned another tier"
            );
        }
        let kept = kept_until_restart(&self.started, &reloaded);
        if !kept.is_empty() {
            tracing::warn!(
                settings = kept.join(", "),
                "these changed settings keep their old values until a restart"
            );
        }
        Ok(())
    }

    /// Puts `config` in force: the reloadable part is built first, so a
    /// failure changes nothing. The start-only settings stay as they were.
    /// The file of known keys is read again; one that cannot be read keeps
    /// the list in force, and is logged.
    pub(crate) fn apply(&self, config: &ServeConfig) -> Result<(), ServeConfigError> {
        let known_keys = match load_known_keys(&config.keys) {
            Ok(known_keys) => {
                if let Some(known) = &known_keys {
                    super::start::log_known_keys(known, config.keys.unknown);
                }
                known_keys
            }
            Err(error) => {
                let Some(kept) = self.reloadable.load().known_keys.clone() else {
                    // No list to keep: going on would take every key.
                    return Err(error);
                };
                tracing::warn!(
                    %error,
                    kept = kept.len(),
                    "the file of known keys cannot be read: the list in force is kept"
                );
                Some(kept)
            }
        };
        let reloadable = Reloadable::build(config, self.store.as_ref(), known_keys)?;
        self.store.reconfigure(&config.limits)?;
        self.reloadable.store(Arc::new(reloadable));
        Ok(())
    }
}
