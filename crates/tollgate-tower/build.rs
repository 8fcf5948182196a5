//! The cfgs `has_redis` and `has_redis_cluster` for this crate's Redis tests
//! (`tests/redis.rs`), set as for the Redis store's own tests: see
//! `crates/tollgate-redis/build.rs`.

include!("build/redis_peers.rs");
