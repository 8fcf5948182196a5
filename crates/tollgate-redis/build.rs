//! Tells the Redis tests which Redis peers they are to use, so that a test
//! that cannot run is reported as ignored rather than as passed: the cfg
//! `has_redis` when `REDIS_URL` is set (not empty), `has_redis_cluster` when
//! `REDIS_CLUSTER_URL` is, and both under `CI=true` whatever the variables
//! say (there a missing peer fails its tests). Each such test carries
//! `#[cfg_attr(not(has_redis), ignore = "set REDIS_URL=redis://127.0.0.1:6379 to run")]`
//! (or `has_redis_cluster` and `REDIS_CLUSTER_URL`). The script itself is
//! `build/redis_peers.rs`, shared with the other packages that have Redis
//! tests (their Redis helpers are `tollgate-test-support`'s `redis`).

include!("build/redis_peers.rs");
