//! Loading never panics, whatever the text: every fault is a `ConfigError`.

use proptest::prelude::*;
use tollgate_rls::{LoaderOptions, NoStats, RateLimitConfig};

const SEED: &str = "domain: d\ndescriptors:\n  - key: k\n    value: v*\n    share_threshold: true\n    rate_limit: {unit: second, requests_per_unit: 1}\n";

proptest! {
    #[test]
    fn yaml_like_text_never_panics(
        text in "[a-z_:\\-\\[\\]{}'\"*&!|>#,.0-9 \n<~]{0,120}",
        extensions in any::<bool>(),
    ) {
        let options = LoaderOptions { merge_domains: true, extensions };
        let _ = RateLimitConfig::from_sources(&[("f", text.as_str())], &options);
    }

    #[test]
    fn edited_configs_never_panic(at in 0usize..SEED.len(), insert in "[a-z:\\-{}\\[\\]' \n*&<]{0,8}") {
        let mut text = SEED.to_owned();
        text.insert_str(at, &insert);
        if let Ok(config) = RateLimitConfig::from_sources(&[("f", text.as_str())], &LoaderOptions::default()) {
            let _ = config.get_limit("d", &[("k", "vvv"), ("k", "")], None, &NoStats);
        }
    }
}

#[test]
fn alias_expansion_is_bounded() {
    let mut text = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
    for level in 1..10 {
        let previous = level - 1;
        text.push_str(&format!(
            "a{level}: &a{level} [*a{previous}, *a{previous}, *a{previous}, *a{previous}, *a{previous}, *a{previous}, *a{previous}, *a{previous}, *a{previous}, *a{previous}]\n"
        ));
    }
    assert!(
        RateLimitConfig::from_sources(&[("f", text.as_str())], &LoaderOptions::default()).is_err()
    );
}

#[test]
fn deep_nesting_is_an_error() {
    let text = format!(
        "domain: d\ndescriptors: {}{}\n",
        "[".repeat(10_000),
        "]".repeat(10_000)
    );
    assert!(
        RateLimitConfig::from_sources(&[("f", text.as_str())], &LoaderOptions::default()).is_err()
    );
}
