//! `examples/rlqs/config` (the directory docs/RLQS.md and the README start
//! `tollgate rlqs` with) loads, and its buckets get the limits its comments
//! give.

use std::collections::HashMap;
use std::path::PathBuf;

use tollgate_core::QuotaRate;
use tollgate_rlqs::bucket::BucketKey;
use tollgate_rlqs::limit::{BucketLimit, resolve};
use tollgate_rls::{ConfigSource, LoaderOptions};

fn bucket(entries: &[(&str, &str)]) -> BucketKey {
    let map: HashMap<String, String> = entries
        .iter()
        .map(|&(key, value)| (key.to_owned(), value.to_owned()))
        .collect();
    BucketKey::from_map(&map).unwrap()
}

#[test]
fn the_example_configuration_loads_with_the_limits_its_comments_give() {
    let directory = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/rlqs/config");
    let source = ConfigSource::directory(&directory, LoaderOptions::default());
    let config = source.load(&source.read().unwrap()).unwrap();
    let limit = |entries: &[(&str, &str)]| resolve(Some(&config), "edge", &bucket(entries)).0;
    assert_eq!(
        limit(&[("name", "shared")]),
        BucketLimit::Shared(QuotaRate {
            tokens: 100,
            per_s: 1,
            burst: 100
        })
    );
    // A fixed window of a minute: counted.
    assert_eq!(
        limit(&[("tenant", "acme"), ("route", "search")]),
        BucketLimit::Window(QuotaRate {
            tokens: 600,
            per_s: 60,
            burst: 10
        })
    );
    assert_eq!(limit(&[("name", "internal")]), BucketLimit::AllowAll);
}
