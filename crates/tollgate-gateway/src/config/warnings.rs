//! What in a valid configuration works, but probably not as meant: the
//! warnings logged at start and on every reload.

use super::ServeConfig;
use super::admin::EXAMPLE_ADMIN_TOKEN;

impl ServeConfig {
    /// What in a valid configuration works, but probably not as meant: one
    /// sentence each, for the log (they name settings, never a key or token).
    ///
    /// A setting written in the old layout of `tollgate run --config` gets
    /// its warning ([`ServeConfig::layout_warnings`]). (A policy counting
    /// over a span longer than `limits.idle_eviction_s` is no longer one:
    /// the in-memory limiter keeps a key's state until it is whole again.)
    pub fn warnings(&self) -> Vec<String> {
        let mut warnings = self.layout_warnings();
        warnings.extend(self.upstream_tls.warning());
        if !self.access_log.enabled && self.access_log.path.is_some() {
            warnings.push(
                "access_log.path is set but access_log.enabled is not: no access log is written \
                 (set enabled = true)"
                    .to_owned(),
            );
        }
        warnings
    }

    /// Every warning a gateway started on this configuration (with the store
    /// it names) would log: [`ServeConfig::warnings`], the admin token's and
    /// the Redis key secret's.
    pub fn start_warnings(&self) -> Vec<String> {
        let mut warnings = self.warnings();
        warnings.extend(self.admin_token_warning(self.admin.token_in_force().as_deref()));
        warnings.extend(self.key_secret_warning());
        warnings
    }

    /// The warning about key digests without a secret, if one is due: Redis
    /// key names, or the access log's key fingerprints.
    pub(crate) fn key_secret_warning(&self) -> Option<String> {
        if self.store.key_secret().is_some() {
            return None;
        }
        let variable = &self.store.key_secret_env;
        if self.store.url.is_some() {
            return Some(format!(
                "no key secret (${variable}): Redis key names are plain SHA-256 hashes of API \
                 keys, so anyone who can read Redis can confirm a guessed key"
            ));
        }
        self.access_log.enabled.then(|| {
            format!(
                "no key secret (${variable}): the access log's key fingerprints are plain \
                 SHA-256 hashes of API keys, so anyone who can read the log can confirm a \
                 guessed key"
            )
        })
    }

    /// The warning about the admin token in force (`token`, from
    /// [`AdminConfig::token_in_force`](super::AdminConfig)), if one is due:
    /// none at all, or the example's. Never shows a token of the user's.
    pub(crate) fn admin_token_warning(&self, token: Option<&str>) -> Option<String> {
        let variable = &self.admin.token_env;
        match token {
            None => Some(format!(
                "no admin token (admin.token or ${variable}): every admin call will be refused"
            )),
            Some(EXAMPLE_ADMIN_TOKEN) => Some(format!(
                "the admin token is the example's \"{EXAMPLE_ADMIN_TOKEN}\": set your own in \
                 admin.token or ${variable}"
            )),
            Some(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_secret_is_asked_for_where_key_digests_leave_the_process() {
        // A variable no test sets: no secret.
        let warning = |extra: &str| {
            ServeConfig::from_toml_str(&format!(
                "[store]\nkey_secret_env = \"TOLLGATE_TEST_SECRET_UNSET\"\n{extra}"
            ))
            .unwrap()
            .key_secret_warning()
        };
        assert_eq!(warning(""), None);
        assert_eq!(
            warning("[access_log]\nenabled = true\n").as_deref(),
            Some(
                "no key secret ($TOLLGATE_TEST_SECRET_UNSET): the access log's key fingerprints \
                 are plain SHA-256 hashes of API keys, so anyone who can read the log can \
                 confirm a guessed key"
            )
        );
        assert!(
            warning("")
                .or(warning("[access_log]\nenabled = false\n"))
                .is_none()
        );
    }
}
