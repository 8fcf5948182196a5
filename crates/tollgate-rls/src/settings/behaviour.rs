//! The settings of the service's behaviour: the [`ServiceSettings`] that
//! [`RlsArguments`] name.

use super::arguments::RlsArguments;
use super::store::StoreSettings;
use crate::service::{Extensions, ServiceSettings};

impl RlsArguments {
    /// The [`ServiceSettings`] these settings name: `SHADOW_MODE`,
    /// `QUOTA_MODE`, `NEAR_LIMIT_RATIO`, `LIMIT_RESPONSE_HEADERS_ENABLED` and
    /// the three header names, `RESPONSE_DYNAMIC_METADATA`,
    /// `STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT`, `CACHE_KEY_PREFIX`,
    /// `LOCAL_CACHE_SIZE_IN_BYTES`, tollgate's extensions, and whether long
    /// store keys are digested (limits in memory: `REDIS_URL` unset).
    pub fn service_settings(&self) -> ServiceSettings {
        ServiceSettings {
            shadow_mode: self.shadow_mode,
            quota_mode: self.quota_mode,
            near_limit_ratio: self.near_limit_ratio,
            limit_response_headers_enabled: self.limit_response_headers_enabled,
            limit_limit_header: self.limit_limit_header.clone(),
            limit_remaining_header: self.limit_remaining_header.clone(),
            limit_reset_header: self.limit_reset_header.clone(),
            response_dynamic_metadata: self.response_dynamic_metadata,
            stop_cache_key_increment_when_overlimit: self.stop_cache_key_increment_when_overlimit,
            cache_key_prefix: self.cache_key_prefix.clone(),
            local_cache_size_bytes: self.local_cache_size_in_bytes,
            // Redis names every key by its digest already.
            digest_long_keys: matches!(self.store_settings(), Ok(StoreSettings::Memory)),
            extensions: Extensions {
                all_or_nothing: self.all_or_nothing,
                retry_after_header: self.retry_after_header,
                ietf_headers: self.ietf_headers,
                refunds: self.refunds,
                store_failure: self.store_failure,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_are_the_services() {
        assert_eq!(
            RlsArguments::defaults().service_settings(),
            ServiceSettings::default()
        );
    }

    #[test]
    fn long_keys_are_digested_only_in_memory() {
        assert!(RlsArguments::defaults().service_settings().digest_long_keys);
        let mut arguments = RlsArguments::defaults();
        arguments.redis_url = Some(crate::settings::Secret::new("127.0.0.1:6379"));
        assert!(!arguments.service_settings().digest_long_keys);
    }
}
