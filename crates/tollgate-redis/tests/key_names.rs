//! A limited key's Redis name: HMAC-SHA-256 of its key space and key under the
//! store's key secret, or plain SHA-256 without one; the expected names are
//! computed here with the hash crates directly, not by the store.

use std::time::Duration;

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};
use tollgate_core::{Limit, LimiterConfig, Store};
use tollgate_redis::{RedisConfig, RedisStore};
use tollgate_test_support::redis as support;

/// `PREFIX:{first 16 bytes of digest, in hex}:s`.
fn state_key(prefix: &str, digest: &[u8]) -> String {
    let hex: String = digest[..16]
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect();
    format!("{prefix}:{{{hex}}}:s")
}

async fn keys_after_one_request(url: &str, prefix: &str, secret: Option<&str>) -> Vec<String> {
    let mut config = RedisConfig::new(url);
    config.prefix = prefix.to_owned();
    config.timeout = Duration::from_secs(5);
    config.key_secret = secret.map(str::to_owned);
    let store = RedisStore::connect(config, &LimiterConfig::default()).unwrap();
    let decisions = store.acquire(&[Limit::Plan("sk_live_a")]).await.unwrap();
    assert!(decisions[0].decision.is_allowed());
    let mut keys = support::keys(url, &format!("{prefix}:{{*}}:s"));
    keys.sort();
    keys
}

#[tokio::test]
#[cfg_attr(not(has_redis), ignore = "set REDIS_URL=redis://127.0.0.1:6379 to run")]
async fn with_a_secret_names_are_keyed_hashes() {
    let url = support::require_redis_url();
    let prefix = support::prefix("key-names");
    let mut mac = Hmac::<Sha256>::new_from_slice(b"a shared secret").unwrap();
    mac.update(b"plan\0sk_live_a");
    let keyed = mac.finalize().into_bytes();
    assert_eq!(
        keys_after_one_request(&url, &prefix, Some("a shared secret")).await,
        [state_key(&prefix, &keyed)]
    );
    support::cleanup(&url, &prefix);

    // Without one: the plain SHA-256 names of before, which a guess confirms.
    let plain = Sha256::digest(b"plan\0sk_live_a");
    assert_eq!(
        keys_after_one_request(&url, &prefix, None).await,
        [state_key(&prefix, &plain)]
    );
    support::cleanup(&url, &prefix);
}
